#!/usr/bin/env bash
# Build a release: the sdist and wheel (checked by twine), the Helm chart
# package, and with --images the worker and controller images labelled with
# the version (OCI labels). Refuses to build when the versions disagree.
#
# Usage: bash scripts/release.sh [--images] [--check-versions]
#   --check-versions  only check that pyproject.toml, Chart.yaml (version,
#                     appVersion and the artifacthub.io/images tags) and
#                     CHANGELOG.md name the same version
# Output: dist/taskscale-V.tar.gz, dist/taskscale-V-py3-none-any.whl,
#         dist/taskscale-V.tgz (chart); images taskscale-{worker,controller}:V
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
images=0 only_check=0
for arg in "$@"; do
  case "$arg" in
    --images) images=1 ;;
    --check-versions) only_check=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "release.sh: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -1)"
chart_version="$(sed -n 's/^version: *//p' charts/taskscale/Chart.yaml)"
app_version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/taskscale/Chart.yaml)"
bad=0
[ -n "$version" ] || { echo "release.sh: no version in pyproject.toml" >&2; exit 1; }
[ "$chart_version" = "$version" ] || { echo "release.sh: Chart.yaml version $chart_version != $version" >&2; bad=1; }
[ "$app_version" = "$version" ] || { echo "release.sh: Chart.yaml appVersion $app_version != $version" >&2; bad=1; }
grep -q "^## \[$version\]" CHANGELOG.md || { echo "release.sh: CHANGELOG.md has no ## [$version] section" >&2; bad=1; }
# Artifact Hub's list of the chart's images names them with the version too
for name in taskscale-controller taskscale-worker; do
  tag="$(sed -n "s|^ *image: *[^ ]*/$name:\([^ ]*\)$|\1|p" charts/taskscale/Chart.yaml)"
  [ "$tag" = "$version" ] || {
    echo "release.sh: Chart.yaml artifacthub.io/images has $name:${tag:-(none)}, not $version" >&2
    bad=1
  }
done
bash charts/taskscale/sync-crd.sh --check || bad=1
[ "$bad" = 0 ] || exit 1
echo "release.sh: version $version agrees everywhere" >&2
[ "$only_check" = 1 ] && exit 0

py=.venv/bin/python
[ -x "$py" ] || { echo "release.sh: run 'make setup' first" >&2; exit 1; }
rm -rf dist
"$py" -m build --outdir dist . >&2
"$py" -m twine check --strict dist/*

helm="${TASKSCALE_HELM:-}"
if [ -z "$helm" ]; then
  helm="$(bash e2e/cluster/build.sh | sed -n 's/^TASKSCALE_HELM_BIN=//p')"
fi
"$helm" lint charts/taskscale >&2
"$helm" package charts/taskscale --destination dist >&2

if [ "$images" = 1 ]; then
  bash e2e/images.sh --tag "$version"
fi
ls -l dist >&2
