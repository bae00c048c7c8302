package imagepull

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"syscall"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
)

// What a failed download reports. An Image's status is read by every
// admin and node, and the download runs as root wherever its URL leads:
// a message that quoted what the server sent (an error body, a status
// line's reason phrase, the bytes of a malformed response, which Go's
// transport puts in its errors) would read a service out through the
// Image. So the message is built from what the node knows (the URL, the
// status code, what the policy refused, which bound stopped it, the kind
// of network error) and the whole cause goes only to the node agent's
// log.

// fetchError is a failed download as the node reports it.
type fetchError struct {
	msg string
	err error
}

func (e *fetchError) Error() string { return e.msg }
func (e *fetchError) Unwrap() error { return e.err }

// causeOf is the whole cause of a failed download, for the log.
func causeOf(err error) error {
	var fe *fetchError
	if errors.As(err, &fe) {
		return fe.err
	}
	return err
}

// statusError is a response the node does not take, by its code.
type statusError struct{ code int }

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d %s", e.code, http.StatusText(e.code))
}

// ownError is a failure the node found itself, in its words.
type ownError struct{ msg string }

func (e *ownError) Error() string { return e.msg }

// readError is a download cut off after at bytes.
type readError struct {
	at  int64
	err error
}

func (e *readError) Error() string { return fmt.Sprintf("after %d bytes: %v", e.at, e.err) }
func (e *readError) Unwrap() error { return e.err }

// describe turns err, from fetching src under ctx, into a fetchError
// whose message holds no byte the server chose. A bound that stopped the
// download (ctx's cause) is the reason, whatever the read said.
func describe(ctx context.Context, src string, err error) error {
	var be *boundError
	if errors.As(context.Cause(ctx), &be) {
		err = be
	}
	msg := validation.RedactURL(src) + ": " + reason(err)
	var re *readError
	if errors.As(err, &re) && !errors.As(err, &be) {
		msg += fmt.Sprintf(" (after %d bytes)", re.at)
	}
	return &fetchError{msg: msg, err: err}
}

// reason is what err is, in the node's own words.
func reason(err error) string {
	var (
		be   *boundError
		own  *ownError
		re   *imagepolicy.RefusedError
		se   *imagepolicy.SchemeError
		st   *statusError
		dns  *net.DNSError
		ne   net.Error
		uae  x509.UnknownAuthorityError
		hne  x509.HostnameError
		cie  x509.CertificateInvalidError
		rhe  tls.RecordHeaderError
		path *fs.PathError
	)
	switch {
	case errors.As(err, &be):
		return be.msg
	case errors.As(err, &own):
		return own.msg
	case errors.As(err, &re):
		return re.Error()
	case errors.As(err, &se):
		return se.Error()
	case errors.Is(err, imagepolicy.ErrNoPolicy):
		return imagepolicy.ErrNoPolicy.Error()
	case errors.As(err, &st):
		return st.Error()
	case errors.Is(err, errRangeNotSatisfiable), errors.Is(err, errNoSpace):
		return err.Error() // the node's own
	case errors.Is(err, context.Canceled):
		return "stopped"
	case errors.As(err, &dns) && dns.IsNotFound:
		return "no such host"
	case errors.As(err, &dns):
		return "the host name could not be resolved"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to the host"
	case errors.As(err, &uae), errors.As(err, &cie):
		return "TLS: the server's certificate is not trusted"
	case errors.As(err, &hne):
		return "TLS: the server's certificate is not for this host name"
	case errors.As(err, &rhe):
		return "TLS: the server does not speak TLS"
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection closed before the download ended"
	case errors.As(err, &path):
		return err.Error() // a file of this node's
	}
	return "the download failed (the node agent's log has the cause)"
}
