// Command goproxy writes polyop's Go modules at a version into a module proxy
// folder that GOPROXY=file://DIR serves, as the module proxy serves them
// once a release pushes its tags (see internal/goproxy and docs/releasing.md):
//
//	go run ./hack/goproxy -out dist/goproxy -version v0.1.0
//
// It prints the go.sum lines of each module it wrote.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/polyop/polyop/internal/goproxy"
)

func main() {
	out := flag.String("out", "dist/goproxy", "The proxy folder to write into.")
	version := flag.String("version", "", "The version, such as v0.1.0 (a leading v is added when missing).")
	root := flag.String("root", ".", "The root of the git working tree.")
	flag.Parse()
	if *version == "" {
		log.Fatal("-version is required")
	}
	v := *version
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	written, err := goproxy.Write(*out, *root, v, commitTime(*root), []goproxy.Module{{Dir: "."}, {Dir: "sdk/go"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range written {
		fmt.Print(w.GoSumLines())
	}
}

// commitTime is the time of the working tree's HEAD commit, so that writing
// the same commit twice gives the same folder; now when there is none.
func commitTime(root string) time.Time {
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%cI").Output()
	if err == nil {
		if t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(out))); err == nil {
			return t
		}
	}
	fmt.Fprintln(os.Stderr, "goproxy: no commit time (not a git checkout?): stamping the modules with the time now")
	return time.Now()
}
