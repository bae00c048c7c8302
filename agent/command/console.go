package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/termraw"
)

// consoleEscape (Ctrl-]) leaves an interactive console, as in telnet and
// virsh console.
const consoleEscape = 0x1d

type consoleOptions struct {
	interactive bool
	log         bool
	tail        int64
	noFollow    bool
}

func newConsoleCommand(o *rootOptions) *cobra.Command {
	var co consoleOptions
	cmd := &cobra.Command{
		Use:   "console NAME",
		Short: "Stream a virtual machine's serial console",
		Long: `Stream the serial console of the VM (or bare VMI) NAME through the API.

Without flags, the output from now on is shown until the instance ends or
Ctrl-C. --log shows the kept log first (the running instance's, or the last
ended instance's when none runs: at least its last 1 MiB); --tail limits it
to its last bytes, and --no-follow ends after it. --interactive also sends
what is typed to the guest's serial port (the terminal is put in raw mode);
Ctrl-] leaves. Notices that are not guest output go to stderr.`,
		Example: `  virtplane-agent console web
  virtplane-agent console web --log --no-follow
  virtplane-agent console web -i`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if co.tail < 0 {
				return errors.New("--tail must not be negative")
			}
			return o.runConsole(cmd, args[0], co)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&co.interactive, "interactive", "i", false, "send input to the guest's serial port (Ctrl-] leaves)")
	f.BoolVar(&co.log, "log", false, "show the kept console log first (also of an instance that has ended)")
	f.Int64Var(&co.tail, "tail", 0, "with --log: only the last BYTES of it (0: all that is kept)")
	f.BoolVar(&co.noFollow, "no-follow", false, "end after the kept log instead of streaming new output")
	return cmd
}

func (o *rootOptions) runConsole(cmd *cobra.Command, name string, co consoleOptions) error {
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	stream, err := c.Consoles.Attach(ctx)
	if err != nil {
		return consoleError(err)
	}
	open := &apiv1.ConsoleOpen{
		Namespace: o.namespace, Name: name, Interactive: co.interactive,
		Log: co.log, Follow: !co.noFollow, TailBytes: co.tail,
	}
	// A failed Send shows its reason on Recv.
	_ = stream.Send(&apiv1.ConsoleInput{Open: open})

	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	eol := "\n"
	var left atomic.Bool
	if co.interactive {
		in := cmd.InOrStdin()
		if f, ok := in.(*os.File); ok && termraw.IsTerminal(f) {
			restore, err := termraw.MakeRaw(f)
			if err != nil {
				return fmt.Errorf("raw terminal: %w", err)
			}
			defer func() { _ = restore() }()
			eol = "\r\n" // raw mode: no newline translation
		}
		fmt.Fprintf(stderr, "Connected to the console of %s/%s. Press Ctrl-] to leave.%s", o.namespace, name, eol)
		go forwardInput(in, stream, func() { left.Store(true); cancel() })
	}
	for {
		out, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if left.Load() || interrupted(cmd.Context(), err) {
				return nil
			}
			return consoleError(err)
		}
		if d := out.GetData(); len(d) > 0 {
			if _, err := stdout.Write(d); err != nil {
				return err
			}
		}
		if n := out.GetNotice(); n != "" {
			fmt.Fprintf(stderr, "[%s]%s", n, eol)
		}
	}
}

// forwardInput sends what is read from in to the console until in ends
// (then the input side is closed, and output goes on) or the escape
// byte, which calls leave. It is the only sender once the console opened.
func forwardInput(in io.Reader, stream apiv1.Consoles_AttachClient, leave func()) {
	buf := make([]byte, 4096)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			data, escaped := cutEscape(buf[:n])
			if len(data) > 0 {
				if serr := stream.Send(&apiv1.ConsoleInput{Data: bytes.Clone(data)}); serr != nil {
					return
				}
			}
			if escaped {
				leave()
				return
			}
		}
		if err != nil {
			_ = stream.CloseSend()
			return
		}
	}
}

// cutEscape returns what comes before the escape byte and whether there
// was one.
func cutEscape(b []byte) ([]byte, bool) {
	if i := bytes.IndexByte(b, consoleEscape); i >= 0 {
		return b[:i], true
	}
	return b, false
}

// consoleError rewords an API error for the terminal. The API's console
// messages already name the VM and the node.
func consoleError(err error) error {
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unavailable && strings.HasPrefix(st.Message(), "node ") {
		// The agent answered: the node holding the console did not.
		return &apiError{msg: st.Message(), err: err}
	}
	return describeError(err, nil, "")
}
