package etcdserver

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const crashDirEnv = "ETCDSERVER_CRASH_DIR"

// TestCrashChild is the process TestSurvivesSIGKILL kills: it acknowledges
// writes on stdout and then waits to be killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestSurvivesSIGKILL")
	}
	s, err := Start(context.Background(), Config{DataDir: dir})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for i := range 20 {
		if _, err := s.Client().Put(context.Background(), fmt.Sprintf("k%02d", i), "v"); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
	}
	fmt.Println("acked")
	select {}
}

// Acknowledged writes survive SIGKILL, and a restart copes with the socket
// the killed server left behind.
func TestSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	cmd.Process.Kill()
	cmd.Wait()
	if strings.TrimSpace(line) != "acked" {
		t.Fatalf("child: %q", line)
	}

	s := start(t, dir)
	resp, err := s.Client().Get(t.Context(), "k", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 20 {
		t.Fatalf("%d keys after SIGKILL, want 20 acknowledged", resp.Count)
	}
}
