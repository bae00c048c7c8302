package command

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// auth token and auth cert: credentials of a user or service account.
// A secret exists only in the answer to the issuing call (the server keeps
// a hash or a serial), so issue prints the token alone on standard output,
// ready for `> file`; a certificate's key is made here and never sent.

// subjectFlags are --user and --service-account, one of which names a
// subject.
type subjectFlags struct{ user, serviceAccount string }

func (f *subjectFlags) add(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&f.user, "user", "", what+" of this user")
	cmd.Flags().StringVar(&f.serviceAccount, "service-account", "", what+" of this service account, NAMESPACE/NAME")
}

func (f *subjectFlags) subject() (*apiv1.Subject, error) {
	return parseSubject(f.user, f.serviceAccount)
}

// credentialFlags are what an issued credential takes besides its subject.
type credentialFlags struct {
	subjectFlags
	ttl         time.Duration
	description string
}

func (f *credentialFlags) add(cmd *cobra.Command) {
	f.subjectFlags.add(cmd, "a credential")
	cmd.Flags().DurationVar(&f.ttl, "ttl", 0, "how long it is valid, e.g. 720h (default: the server's, 90 days; at most 2 years)")
	cmd.Flags().StringVar(&f.description, "description", "", "what the credential is for (shown by token list)")
}

func newAuthTokenCommand(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Bearer tokens of users and service accounts: issue, list, revoke"}
	var f credentialFlags
	issue := &cobra.Command{
		Use:   "issue (--user NAME | --service-account NAMESPACE/NAME) [--ttl 720h] [--description TEXT]",
		Short: "Issue a token and print it, once",
		Long: `Issue a bearer token ("vpt_...") of a user or service account and print it on
standard output, and nothing else there: it is shown only now (the server keeps
its SHA-256), so redirect it to a file. Cluster-admins issue users' tokens, a
namespace's admins those of its service accounts.`,
		Example: `  virtplane-agent auth token issue --service-account team-a/deployer --ttl 720h > deployer.token
  VIRTPLANE_TOKEN_FILE=deployer.token virtplane-agent get vms -n team-a`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			subject, err := f.subject()
			if err != nil {
				return err
			}
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				resp, err := c.Credentials.IssueToken(cmd.Context(), &apiv1.IssueTokenRequest{
					Subject: subject, TtlSeconds: int64(f.ttl.Seconds()), Description: f.description,
				})
				if err != nil {
					return describeError(err, nil, "")
				}
				if resp.GetToken() == "" {
					return errors.New("the server issued no token")
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), resp.GetToken())
				return err
			})
		},
	}
	f.add(issue)

	var lf subjectFlags
	list := &cobra.Command{
		Use:   "list [--user NAME | --service-account NAMESPACE/NAME]",
		Short: "List credentials (tokens and certificates), all or one subject's; never a secret",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var subject *apiv1.Subject
			if lf.user != "" || lf.serviceAccount != "" {
				var err error
				if subject, err = lf.subject(); err != nil {
					return err
				}
			}
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				items, _, err := client.ListAll(cmd.Context(), nil, func(ctx context.Context, opts *apiv1.ListOptions) (*apiv1.ListCredentialsResponse, error) {
					return c.Credentials.List(ctx, &apiv1.ListCredentialsRequest{Options: opts, Subject: subject})
				})
				if err != nil {
					return describeError(err, nil, "")
				}
				return printObjects(cmd.OutOrStdout(), cmd.ErrOrStderr(), credentialResource, objects(items), "")
			})
		},
	}
	lf.add(list, "the credentials")

	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a credential (token or certificate) at once, on every server; its open calls end",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				_, err := c.Credentials.Revoke(cmd.Context(), &apiv1.RevokeCredentialRequest{Name: args[0]})
				return printDone(cmd.OutOrStdout(), err, credentialResource, args[0], "revoked")
			})
		},
	}
	cmd.AddCommand(issue, list, revoke)
	return cmd
}

// Files cert issue writes in --out-dir.
const (
	certFileName = "client.crt"
	keyFileName  = "client.key"
	caFileName   = "ca.crt"
)

func newAuthCertCommand(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "cert", Short: "Client certificates of users and service accounts, signed by the agent CA"}
	var (
		f      credentialFlags
		outDir string
	)
	issue := &cobra.Command{
		Use:   "issue (--user NAME | --service-account NAMESPACE/NAME) --out-dir DIR [--ttl 720h]",
		Short: "Make a key here and have the agent CA certify it",
		Long: `Make a private key and a certificate request here, and have the agent CA sign
the certificate; the key never leaves this host. Writes DIR/client.key (0600),
DIR/client.crt and DIR/ca.crt (the agent CA, to verify the server with), and
refuses to overwrite them. Use them with --client-cert, --client-key and
--ca-file (or VIRTPLANE_CLIENT_CERT, VIRTPLANE_CLIENT_KEY, VIRTPLANE_CA_FILE).
Revoke it with auth token revoke NAME, the credential's name printed here.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			subject, err := f.subject()
			if err != nil {
				return err
			}
			paths := []string{filepath.Join(outDir, keyFileName), filepath.Join(outDir, certFileName), filepath.Join(outDir, caFileName)}
			for _, p := range paths {
				if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("--out-dir: %s exists; choose an empty directory", p)
				}
			}
			key, csr, err := newCertificateRequest(subjectString(subject))
			if err != nil {
				return err
			}
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				resp, err := c.Credentials.IssueCertificate(cmd.Context(), &apiv1.IssueCertificateRequest{
					Subject: subject, CsrPem: csr, TtlSeconds: int64(f.ttl.Seconds()), Description: f.description,
				})
				if err != nil {
					return describeError(err, nil, "")
				}
				if err := os.MkdirAll(outDir, 0o700); err != nil {
					return fmt.Errorf("--out-dir: %w", err)
				}
				for i, content := range [][]byte{key, resp.GetCertificatePem(), resp.GetCaPem()} {
					mode := os.FileMode(0o644)
					if i == 0 {
						mode = 0o600
					}
					if err := writeNewFile(paths[i], content, mode); err != nil {
						return err
					}
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "credential/%s issued: %s, %s, %s\n",
					resp.GetCredential().GetMetadata().GetName(), paths[1], paths[0], paths[2])
				return err
			})
		},
	}
	f.add(issue)
	issue.Flags().StringVar(&outDir, "out-dir", "", "directory for client.key, client.crt and ca.crt")
	_ = issue.MarkFlagRequired("out-dir")
	cmd.AddCommand(issue)
	return cmd
}

// newCertificateRequest makes a P-256 key (PEM) and a certificate request
// for it (PEM). The request's subject only informs: the server puts the
// credential's own subject in the certificate.
func newCertificateRequest(commonName string) (keyPEM, csrPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key: %w", err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: commonName}}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr}), nil
}

// writeNewFile writes a file that must not exist yet, with mode from the
// start (a key is never readable by others, not even for a moment).
func writeNewFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
