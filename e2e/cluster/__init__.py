"""Local Kubernetes for tests: build.sh builds the binaries, localcluster.py runs them."""
