package imagepull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
)

// resumeInfo is kept next to a download in progress (<download>.json): a
// later attempt resumes the file only for the same image and source, and
// only while the server still has the same content (If-Range).
type resumeInfo struct {
	ImageUID     string `json:"imageUID"`
	URL          string `json:"url"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
}

func resumeInfoPath(download string) string { return download + ".json" }

func readResumeInfo(download string) (resumeInfo, bool) {
	var ri resumeInfo
	return ri, readJSON(resumeInfoPath(download), &ri)
}

// readJSON decodes the file at path into v; false when it is missing or
// unreadable (a record or resume file a crash cut short counts as none).
func readJSON(path string, v any) bool {
	b, err := os.ReadFile(path)
	return err == nil && json.Unmarshal(b, v) == nil
}

// counter tells a pull's progress as bytes arrive.
type counter interface {
	// start is called once the size is known: done bytes are there
	// already (a resumed download), total is 0 when unknown.
	start(done, total int64)
	add(n int64)
}

// fetch downloads src into the file download, at most maxSize bytes,
// resuming what an earlier attempt for the same image (uid) left there
// when the server supports ranges and still has the same content. An
// HTTP source is fetched under the policy in ctx (imagepolicy.WithPolicy),
// and its errors say only what the node knows (describe).
func (p *Puller) fetch(ctx context.Context, name, uid, src, download string, c counter, maxSize int64) error {
	if src == validation.ImageUploadURL {
		return p.fetchUpload(ctx, name, uid, download, c, maxSize)
	}
	u, err := url.Parse(src)
	if err != nil {
		return err
	}
	if u.Scheme == "file" {
		os.Remove(resumeInfoPath(download))
		path, err := p.fileSource(u.Path)
		if err != nil {
			return err
		}
		return copyFile(ctx, path, download, c, maxSize)
	}
	err = p.fetchHTTP(ctx, uid, src, download, c, maxSize)
	if err != nil {
		return describe(ctx, src, err)
	}
	return nil
}

func (p *Puller) fetchHTTP(ctx context.Context, uid, src, download string, c counter, maxSize int64) error {
	err := p.fetchHTTPOnce(ctx, uid, src, download, c, maxSize)
	if errors.Is(err, errRangeNotSatisfiable) {
		// The kept part is as long as the content or longer (complete
		// but never committed, or the content shrank): start over.
		discard(download)
		err = p.fetchHTTPOnce(ctx, uid, src, download, c, maxSize)
	}
	return err
}

// errRangeNotSatisfiable: the server has no bytes past what is kept.
var errRangeNotSatisfiable = errors.New("range not satisfiable")

// discard removes a download and its resume record.
func discard(download string) {
	os.Remove(download)
	os.Remove(resumeInfoPath(download))
}

func (p *Puller) fetchHTTPOnce(ctx context.Context, uid, src, download string, c counter, maxSize int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "virtplane-agent")
	var have int64
	if ri, ok := readResumeInfo(download); ok && ri.ImageUID == uid && ri.URL == src && (ri.ETag != "" || ri.LastModified != "") {
		if fi, err := os.Stat(download); err == nil && fi.Size() > 0 {
			have = fi.Size()
			req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
			// Only the same content may be continued; otherwise the
			// server sends all of it (200).
			if ri.ETag != "" && !strings.HasPrefix(ri.ETag, "W/") {
				req.Header.Set("If-Range", ri.ETag)
			} else {
				req.Header.Set("If-Range", ri.LastModified)
			}
		}
	}
	resp, err := p.opts.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()

	flags := os.O_WRONLY | os.O_CREATE
	switch resp.StatusCode {
	case http.StatusPartialContent:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != have {
			return &ownError{fmt.Sprintf("the server resumed elsewhere than at byte %d", have)}
		}
		flags |= os.O_APPEND
	case http.StatusOK:
		have = 0
		flags |= os.O_TRUNC
	case http.StatusRequestedRangeNotSatisfiable:
		if have > 0 {
			return fmt.Errorf("resuming at byte %d: %w", have, errRangeNotSatisfiable)
		}
		fallthrough
	default:
		// The code only: the body, and the reason phrase of the status
		// line, are what the server chose to say, and the status of an
		// Image is read by every admin and node.
		return &statusError{code: resp.StatusCode}
	}
	total := int64(0)
	if resp.ContentLength >= 0 {
		total = have + resp.ContentLength
	}
	if total > maxSize {
		discard(download)
		return tooLarge(maxSize, fmt.Sprintf("the source says the image has %s,", imagepolicy.Bytes(total)))
	}
	if err := p.checkSpace(download, total-have); err != nil {
		return err
	}
	// Written before the data: an agent killed from here on leaves a
	// download the next attempt can continue.
	ri := resumeInfo{ImageUID: uid, URL: src, ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified")}
	b, _ := json.Marshal(ri)
	if err := fsutil.WriteFileAtomic(resumeInfoPath(download), b, 0o600); err != nil {
		return err
	}
	f, err := os.OpenFile(download, flags, 0o600)
	if err != nil {
		return err
	}
	c.start(have, total)
	// One byte past the bound tells a source that would go on.
	body := io.LimitReader(resp.Body, maxSize-have+1)
	n, err := io.Copy(f, countingReader{r: contextReader{ctx: ctx, r: body}, c: c})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &readError{at: have + n, err: err}
	}
	if have+n > maxSize {
		discard(download)
		return tooLarge(maxSize, "the source sent")
	}
	if total > 0 && have+n != total {
		return &ownError{fmt.Sprintf("got %d bytes of %d", have+n, total)}
	}
	return nil
}

// fileSource resolves a file:// source's path, which must lie in one of
// the directories the node's operator allowed (Options.FileRoots): an
// Image is an API object, and its URL must not make the agent, which
// runs as root, copy any file of the host (/etc/shadow, a key) into the
// image directory, where QEMU and guests can read it.
func (p *Puller) fileSource(path string) (string, error) {
	if len(p.opts.FileRoots) == 0 {
		return "", fmt.Errorf("file:// sources are off on node %s: start its agent with --image-source-dir naming the directories they may come from", p.opts.NodeName)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	for _, root := range p.opts.FileRoots {
		r, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(r, real); err == nil && filepath.IsLocal(rel) {
			return real, nil
		}
	}
	return "", fmt.Errorf("%s is outside the directories file:// sources may come from on node %s (%s)", path, p.opts.NodeName, strings.Join(p.opts.FileRoots, ", "))
}

// copyFile copies a file:// source, of at most maxSize bytes. No resume:
// a local copy is quick to repeat.
func copyFile(ctx context.Context, src, download string, c counter, maxSize int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	if fi.Size() > maxSize {
		return tooLarge(maxSize, fmt.Sprintf("%s has %s,", src, imagepolicy.Bytes(fi.Size())))
	}
	out, err := os.OpenFile(download, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	c.start(0, fi.Size())
	n, err := io.Copy(out, countingReader{r: contextReader{ctx: ctx, r: io.LimitReader(in, maxSize+1)}, c: c})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > maxSize { // it grew while copied
		os.Remove(download)
		return tooLarge(maxSize, src+" grew to")
	}
	return err
}

// rangeStart parses the first byte of a "bytes a-b/n" Content-Range.
func rangeStart(cr string) (int64, bool) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	first, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(first, 10, 64)
	return n, err == nil
}

type countingReader struct {
	r io.Reader
	c counter
}

func (cr countingReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	if n > 0 {
		cr.c.add(int64(n))
	}
	return n, err
}

// contextReader stops a copy when ctx ends, between reads.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// errNoSpace is returned when the image cannot fit.
var errNoSpace = errors.New("not enough free space")
