# The two commands of the README: `make demo` and `make test`.
.PHONY: setup demo test lint unit e2e bench bench-runtime bench-reaction release clean

VENV := .venv/bin

setup:
	bash scripts/setup.sh

# Only what the demo needs: redis-server and the dashboard + demo extras (no
# browser, prometheus, Kubernetes build or test tools: those are `make test`'s).
demo:
	TASKSCALE_SETUP_DEMO=1 bash scripts/setup.sh
	$(VENV)/taskscale demo

lint:
	$(VENV)/ruff check taskscale tests bench e2e
	$(VENV)/ruff format --check taskscale tests bench e2e
	$(VENV)/mypy taskscale

# Everything but the end-to-end suite: unit, Redis and Kubernetes API tests.
test: setup lint
	$(VENV)/pytest -m "not e2e" tests

unit:
	$(VENV)/pytest -m "not integration and not kube and not slow and not e2e" tests

# The end-to-end suite: chart checks, images, then the scenarios with real
# pods on a local node (root) -- or on $KUBECONFIG's cluster (docs/operations.md).
e2e:
	TASKSCALE_SETUP_E2E=1 bash scripts/setup.sh
	bash e2e/run.sh

# sdist + wheel (twine-checked) and the chart package in dist/, after checking
# that every file names the same version; IMAGES=1 also builds labelled images.
release: setup
	bash scripts/release.sh $(if $(IMAGES),--images)

# The benchmarks that need only what `make setup` installs (a few minutes);
# docs/benchmarks.md has each one's method and recorded results.
bench: setup
	$(VENV)/python -m bench.simulate --no-plot
	$(VENV)/python -m bench.reconcile_bench

# The worker runtime against RQ, arq, dramatiq, Celery and saq (peers in their own venv).
bench-runtime: setup
	bash bench/setup_peers.sh
	$(VENV)/python -m bench.runtime_bench

# Scale-from-zero reaction on a real API server (the Kubernetes build).
bench-reaction: setup
	$(VENV)/python -m bench.reaction
