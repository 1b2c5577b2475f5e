// The pod sandbox ("pause") program for the local node: these machines
// cannot pull registry.k8s.io/pause, so it is built here (../../build.sh).
module taskscale.dev/e2e/pause

go 1.24.0
