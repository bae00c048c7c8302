package command

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
)

// exportRawSizeHeader is the node's RawSizeHeader (package
// nodeagent/export, which the CLI does not link).
const exportRawSizeHeader = "X-Virtplane-Raw-Size"

type exportDownloadOptions struct {
	*rootOptions
	exportSource
	volume, output, format string
	tokenFile              string
	keep                   bool
	timeout                time.Duration
	clock                  clock.WithTicker
}

func newExportDownloadCommand(root *rootOptions, clk clock.WithTicker) *cobra.Command {
	o := &exportDownloadOptions{rootOptions: root, clock: clk}
	cmd := &cobra.Command{
		Use:   "download VM",
		Short: "Download a volume of a VM's export",
		Long: `Download volume --volume of VM's export (of its snapshot --snapshot) to
--output, as --format (default from the file name: .qcow2 is qcow2, .gz is
gzip, anything else raw), showing bytes, rate and ETA. The size is checked
against what the node announced; a download cut short fails and leaves no
output file.

Without an export of that name the command makes one and deletes it after
the download (--keep keeps it); an existing export needs the token its
create printed (--export-token-file).`,
		Example: `  virtplane-agent export download demo --volume data --output data.qcow2
  virtplane-agent export download demo --volume data --output data.img.gz --keep
  virtplane-agent export download demo --name demo --export-token-file demo.token --volume data --output data.img`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}
	o.exportSource.flags(cmd)
	f := cmd.Flags()
	f.StringVar(&o.volume, "volume", "", "the volume to download (required)")
	f.StringVarP(&o.output, "output", "o", "", "the file to write (required; it is replaced when the download completes)")
	f.StringVar(&o.format, "format", "", "raw, gzip or qcow2 (default from --output's extension)")
	f.StringVar(&o.tokenFile, "export-token-file", "", "the token of an existing export (as export create wrote it)")
	f.BoolVar(&o.keep, "keep", false, "keep an export this command made (its token is then lost: delete it when done)")
	f.DurationVar(&o.timeout, "timeout", defaultExportReadyTimeout, "how long to wait for the export to be Ready")
	_ = cmd.MarkFlagRequired("volume")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func formatOfOutput(path string) string {
	switch {
	case strings.HasSuffix(path, ".qcow2"):
		return apiv1.ExportFormatQcow2
	case strings.HasSuffix(path, ".gz"):
		return apiv1.ExportFormatGzip
	}
	return apiv1.ExportFormatRaw
}

func (o *exportDownloadOptions) run(ctx context.Context, out, errOut io.Writer, vm string) error {
	format := o.format
	if format == "" {
		format = formatOfOutput(o.output)
	}
	if !strings.Contains(","+strings.Join(apiv1.ExportFormats, ",")+",", ","+format+",") {
		return fmt.Errorf("--format %q: want one of %s", format, strings.Join(apiv1.ExportFormats, ", "))
	}
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	name := o.exportName(vm)
	token, made, err := o.exportToken(ctx, c, vm, name)
	if err != nil {
		return err
	}
	if made && !o.keep {
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if _, err := c.Exports.Delete(dctx, &apiv1.DeleteExportRequest{Key: &apiv1.ObjectKey{Namespace: o.namespace, Name: name}}); err != nil {
				fmt.Fprintf(errOut, "warning: deleting export %s: %v\n", name, err)
			}
		}()
	}
	e, err := waitExportReady(ctx, c, o.clock, o.namespace, name, o.timeout)
	if err != nil {
		return err
	}
	link := e.Link(o.volume, format)
	if link == "" {
		var vols []string
		for _, v := range e.GetStatus().GetVolumes() {
			vols = append(vols, v.GetName())
		}
		return fmt.Errorf("export %s has no volume %q in %s; its volumes: %s", name, o.volume, format, strings.Join(vols, ", "))
	}
	n, err := downloadExport(ctx, link, token, e.GetStatus().GetCaCert(), format, o.output, errOut, o.clock)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "volume %s of export %s written to %s (%s, %s bytes)\n", o.volume, name, o.output, format, strconv.FormatInt(n, 10))
	return err
}

// exportToken is the token of export name: read from --export-token-file,
// or that of a new export made here (made).
func (o *exportDownloadOptions) exportToken(ctx context.Context, c *client.Client, vm, name string) (token string, made bool, _ error) {
	if o.tokenFile != "" {
		t, err := pki.ReadToken(o.tokenFile)
		return t, false, err
	}
	_, tok, err := createExport(ctx, c, o.exportSource.object(o.namespace, vm))
	if err != nil {
		if status.Code(err) == codes.AlreadyExists {
			return "", false, fmt.Errorf("export %s exists: pass the token its create printed with --export-token-file, or delete it", name)
		}
		return "", false, err
	}
	return tok, true, nil
}

// downloadExport fetches link into output (through output.part, renamed
// when complete) trusting caPEM alone, and checks the size: the body's
// against Content-Length, and for gzip the decompressed size against
// what the node announced.
func downloadExport(ctx context.Context, link, token, caPEM, format, output string, progress io.Writer, clk clock.WithTicker) (int64, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(caPEM)) {
		return 0, errors.New("the export carries no certificate to trust")
	}
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		// The node answers once the format is made: qemu-img may take a
		// while on a large volume.
		ResponseHeaderTimeout: 30 * time.Minute,
		// Raw bytes as sent: a gzip download is the .gz itself.
		DisableCompression: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set(apiv1.ExportTokenHeader, token)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return 0, fmt.Errorf("download: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	part := output + ".part"
	f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(part) // gone once renamed
	p := newByteProgress(progress, isTerminal(progress), resp.ContentLength, clk)
	stop := p.start()
	var body io.Reader = io.TeeReader(resp.Body, p)
	var rawCount *countingWriter
	var gzErr chan error
	if format == apiv1.ExportFormatGzip {
		// The compressed stream is checked as it arrives: decompressed in
		// a pipe, counted, thrown away.
		pr, pw := io.Pipe()
		rawCount = &countingWriter{}
		gzErr = make(chan error, 1)
		go func() {
			zr, err := gzip.NewReader(pr)
			if err == nil {
				_, err = io.Copy(rawCount, zr)
			}
			pr.CloseWithError(err)
			gzErr <- err
		}()
		body = io.TeeReader(body, pw)
		defer pw.Close()
		n, err := io.Copy(f, body)
		pw.Close()
		if zerr := <-gzErr; err == nil && zerr != nil {
			err = fmt.Errorf("the gzip stream is broken: %w", zerr)
		}
		stop()
		return finishDownload(f, part, output, n, resp, err, rawCount)
	}
	n, err := io.Copy(f, body)
	stop()
	return finishDownload(f, part, output, n, resp, err, nil)
}

func finishDownload(f *os.File, part, output string, n int64, resp *http.Response, err error, raw *countingWriter) (int64, error) {
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("download cut after %d bytes: %w", n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("download cut: %d of %d bytes", n, resp.ContentLength)
	}
	if raw != nil {
		want, perr := strconv.ParseInt(resp.Header.Get(exportRawSizeHeader), 10, 64)
		if perr != nil || raw.n.Load() != want {
			return n, fmt.Errorf("download incomplete: %d bytes once decompressed, the node announced %q", raw.n.Load(), resp.Header.Get(exportRawSizeHeader))
		}
	}
	if err := os.Rename(part, output); err != nil {
		return n, err
	}
	return n, fsutil.SyncDir(filepath.Dir(output))
}

type countingWriter struct{ n atomic.Int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}
