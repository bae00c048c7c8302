package command

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// fakeConsoles answers Attach like the API with one scripted guest: it
// greets, notes, and echoes interactive input.
type fakeConsoles struct {
	apiv1.UnimplementedConsolesServer
	mu    sync.Mutex
	opens []*apiv1.ConsoleOpen
}

func (f *fakeConsoles) Attach(stream apiv1.Consoles_AttachServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	open := first.GetOpen()
	f.mu.Lock()
	f.opens = append(f.opens, proto.Clone(open).(*apiv1.ConsoleOpen))
	f.mu.Unlock()
	switch open.GetName() {
	case "gone":
		return status.Error(codes.NotFound, "VM default/gone has not run on any node")
	case "offline":
		return status.Error(codes.Unavailable, "node n1 is not connected for consoles")
	}
	if err := stream.Send(&apiv1.ConsoleOutput{Data: []byte("hello\r\n")}); err != nil {
		return err
	}
	if err := stream.Send(&apiv1.ConsoleOutput{Notice: "note"}); err != nil {
		return err
	}
	if !open.GetInteractive() {
		return nil
	}
	for {
		in, err := stream.Recv()
		if err != nil {
			return nil
		}
		if err := stream.Send(&apiv1.ConsoleOutput{Data: append([]byte("echo:"), in.GetData()...)}); err != nil {
			return err
		}
	}
}

func (f *fakeConsoles) lastOpen() *apiv1.ConsoleOpen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opens[len(f.opens)-1]
}

func startFakeConsoles(t *testing.T) (*fakeConsoles, string) {
	t.Helper()
	f := &fakeConsoles{}
	return f, serveUnix(t, func(srv *grpc.Server) { apiv1.RegisterConsolesServer(srv, f) })
}

func TestConsoleLogToStdoutNoticesToStderr(t *testing.T) {
	f, endpoint := startFakeConsoles(t)
	out, errOut, err := run(t, endpoint, "console", "web", "-n", "prod", "--log", "--tail", "4096", "--no-follow")
	if err != nil {
		t.Fatal(err)
	}
	if out != "hello\r\n" || errOut != "[note]\n" {
		t.Fatalf("stdout %q, stderr %q", out, errOut)
	}
	want := &apiv1.ConsoleOpen{Namespace: "prod", Name: "web", Log: true, TailBytes: 4096}
	if got := f.lastOpen(); !proto.Equal(got, want) {
		t.Fatalf("opened %v, want %v", got, want)
	}
	if _, _, err := run(t, endpoint, "console", "web"); err != nil {
		t.Fatal(err)
	}
	if got := f.lastOpen(); !got.GetFollow() || got.GetLog() || got.GetInteractive() {
		t.Fatalf("plain console opened %v, want follow only", got)
	}
}

func TestConsoleErrors(t *testing.T) {
	_, endpoint := startFakeConsoles(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"console", "gone", "--log"}, "VM default/gone has not run on any node"},
		{[]string{"console", "offline"}, "node n1 is not connected for consoles"},
		{[]string{"console", "web", "--tail", "-1"}, "--tail must not be negative"},
		{[]string{"console"}, "accepts 1 arg(s), received 0"},
	} {
		if _, _, err := run(t, endpoint, tc.args...); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// Interactive input reaches the console until Ctrl-], which ends the
// command cleanly; what follows it is not sent.
func TestConsoleInteractiveEscape(t *testing.T) {
	f, endpoint := startFakeConsoles(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inR, inW := io.Pipe()
	defer inW.Close()
	var out, errOut testutil.SyncBuffer
	cmd, _ := newRootCommand(func(string) string { return "" })
	cmd.SetArgs([]string{"--endpoint", endpoint, "console", "web", "-i"})
	cmd.SetIn(inR)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	waitOut := func(want string) {
		t.Helper()
		testutil.EventuallyNoError(t, 10*time.Second, fmt.Sprintf("stdout to show %q", want), func() error {
			if !strings.Contains(out.String(), want) {
				return fmt.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
			}
			return nil
		})
	}
	waitOut("hello\r\n")
	if _, err := inW.Write([]byte("ls\r")); err != nil {
		t.Fatal(err)
	}
	waitOut("echo:ls\r")
	if _, err := inW.Write([]byte("x\x1dnot sent")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("console after Ctrl-]: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Ctrl-] did not end the console")
	}
	if strings.Contains(out.String(), "not sent") {
		t.Errorf("input after Ctrl-] was sent: %q", out.String())
	}
	if !strings.Contains(errOut.String(), "Press Ctrl-] to leave") {
		t.Errorf("no escape hint on stderr: %q", errOut.String())
	}
	if got := f.lastOpen(); !got.GetInteractive() || !got.GetFollow() {
		t.Errorf("opened %v", got)
	}
}

func TestCutEscape(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		esc      bool
	}{
		{"abc", "abc", false},
		{"ab\x1dc", "ab", true},
		{"\x1d", "", true},
		{"", "", false},
	} {
		got, esc := cutEscape([]byte(tc.in))
		if string(got) != tc.want || esc != tc.esc {
			t.Errorf("cutEscape(%q) = %q, %v", tc.in, got, esc)
		}
	}
}
