// Package consoletest writes console logs the way virtlogd does, for the
// tests of the console room and of the node agent that serves it.
package consoletest

import (
	"os"
	"strconv"
	"testing"
)

// WriteLog replaces the log at path with s.
func WriteLog(t testing.TB, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// AppendLog appends s to the log at path, as the guest writes.
func AppendLog(t testing.TB, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// RotateLog does what virtlogd does at max_size with max_backups n:
// console.log.(n-2) → .(n-1), …, console.log → .0, and a new console.log.
func RotateLog(t testing.TB, path string, n int) {
	t.Helper()
	for i := n - 1; i > 0; i-- {
		_ = os.Rename(path+"."+strconv.Itoa(i-1), path+"."+strconv.Itoa(i))
	}
	if err := os.Rename(path, path+".0"); err != nil {
		t.Fatal(err)
	}
	WriteLog(t, path, "")
}
