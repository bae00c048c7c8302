// Command virtplane-launcher manages one QEMU domain through libvirt for one
// virtual machine instance, started by the node agent through go-plugin.
// It is a cgo binary because it links libvirt; the libvirt code arrives with
// the node agent and launcher issue.
package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"os"
)

var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println(version)
		return
	}
	fmt.Fprintln(os.Stderr, "virtplane-launcher is started by the node agent; it does not run on its own yet")
	os.Exit(2)
}
