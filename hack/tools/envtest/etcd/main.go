// Command etcd is etcd's own main, built from the module proxy so tests can run
// a real etcd without downloading a release binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
