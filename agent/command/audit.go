package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// audit: the audit log of the server the CLI reaches (cluster-admins;
// docs/security.md, "Audit"). Each server writes its own log, so a
// control plane of several servers is read one endpoint at a time.

type auditOptions struct {
	*rootOptions
	since            time.Duration
	identity, method string
	limit            int64
	output           string
	clock            clock.PassiveClock
}

func newAuditCommand(root *rootOptions, clk clock.PassiveClock) *cobra.Command {
	o := &auditOptions{rootOptions: root, clock: clk}
	cmd := &cobra.Command{
		Use:   "audit [--since 1h] [--identity 'user alice'] [--method VirtualMachines] [-n NAMESPACE] [--limit N]",
		Short: "Print the audit log of the server: who called what, on which object, and the answer",
		Long: `Print the records of the audit log of the server at --endpoint, oldest first:
every write, and every console, export and migration request, with the
identity, the role it held, the method, the object and the answer's code.
A record never holds a request's body (no token, key or cloud-init data).
-n keeps the calls about one namespace's objects (all namespaces' without
it). Cluster-admins only. -o json prints one JSON object a line, as the log
file holds them.`,
		Example: `  virtplane-agent audit --since 24h --namespace team-a
  virtplane-agent audit --identity "serviceaccount team-a/deployer" --method VirtualMachines.Delete
  virtplane-agent audit --since 1h -o json | jq .`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != formatTable && o.output != formatJSON {
				return fmt.Errorf("unsupported output format %q (want table or json)", o.output)
			}
			if o.since < 0 || o.limit < 0 {
				return fmt.Errorf("--since and --limit must not be negative")
			}
			req := &apiv1.ReadAuditRequest{Limit: o.limit, Identity: o.identity, Method: o.method}
			// -n defaults to "default" for the other commands; here
			// only an explicit one filters.
			if o.namespaceExplicit() {
				req.Namespace = o.namespace
			}
			if o.since > 0 {
				req.Since = timestamppb.New(o.clock.Now().Add(-o.since))
			}
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				s, err := c.Audit.Read(cmd.Context(), req)
				if err != nil {
					return describeError(err, nil, "")
				}
				var rows [][]string
				err = client.EachEvent(s, func(r *apiv1.AuditRecord) error {
					if o.output == formatJSON {
						j, err := marshalOptions.Marshal(r)
						if err != nil {
							return err
						}
						_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", compactJSON(j))
						return err
					}
					rows = append(rows, auditRow(r))
					return nil
				})
				if err != nil {
					return describeError(err, nil, "")
				}
				if o.output == formatJSON {
					return nil
				}
				if len(rows) == 0 {
					_, err := fmt.Fprintln(cmd.ErrOrStderr(), "No audit records found")
					return err
				}
				return printTable(cmd.OutOrStdout(), auditColumns, rows)
			})
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.since, "since", 0, "only records of this last while, e.g. 1h (default: all the log holds)")
	f.StringVar(&o.identity, "identity", "", `only this identity's, as records name it: "user alice", "serviceaccount ci/deployer", "admin"`)
	f.StringVar(&o.method, "method", "", "only methods containing this, e.g. VirtualMachines or Delete")
	f.Int64Var(&o.limit, "limit", 0, "at most this many records, the newest (default: the server's, 1000)")
	f.StringVarP(&o.output, "output", "o", formatTable, "output format: table or json (one record a line)")
	return cmd
}

var auditColumns = []string{"TIME", "IDENTITY", "ROLE", "METHOD", "NAMESPACE", "NAME", "CODE", "MESSAGE"}

// auditRow is one record in the table: the method as Service.Method, and
// the message last (it holds spaces).
func auditRow(r *apiv1.AuditRecord) []string {
	return []string{
		timestampCell(r.GetTime()), cell(r.GetIdentity()), cell(r.GetRole()), shortMethod(r.GetMethod()),
		cell(r.GetNamespace()), cell(r.GetName()), cell(r.GetCode()), r.GetMessage(),
	}
}

// shortMethod is "/virtplane.v1.VirtualMachines/Create" as
// "VirtualMachines.Create".
func shortMethod(m string) string {
	svc, method, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
	if !ok {
		return cell(m)
	}
	return strings.TrimPrefix(svc, "virtplane.v1.") + "." + method
}

// compactJSON is j without whitespace: one record a line (protojson's own
// spacing is deliberately unstable).
func compactJSON(j []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, j); err != nil {
		return j
	}
	return b.Bytes()
}
