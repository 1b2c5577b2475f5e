// Command etcd is the etcd server, built as a thin wrapper around etcdmain so
// that it can be built from published modules (see ../../build.sh).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
