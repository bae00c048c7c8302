package command

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// auth: users, service accounts, their credentials and role bindings,
// and what the caller itself is and may do (docs/security.md). get,
// delete and apply -f take the same kinds (kinds_tenancy.go); these
// commands are the short ways to make them. Refusals are the server's
// words, which name the role that would allow the call.

func newAuthCommand(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Users, service accounts, tokens, client certificates and role bindings; whoami and can-i",
		Long: `Manage who may call the API (docs/security.md).

Users (cluster-wide) and service accounts (of one namespace) hold
credentials: bearer tokens and client certificates signed by the agent CA,
each shown once when issued, revocable, expiring. Role bindings give them
a role in a namespace (admin, edit, view); cluster role bindings give one
everywhere (cluster-admin, or admin/edit/view in every namespace).

A token is used like the admin token: VIRTPLANE_TOKEN, --token-file, or
the Terraform provider's token; a certificate with --client-cert and
--client-key.`,
	}
	cmd.AddCommand(newAuthUserCommand(o), newAuthServiceAccountCommand(o), newAuthTokenCommand(o), newAuthCertCommand(o),
		newAuthBindCommand(o), newAuthUnbindCommand(o), newAuthBindingsCommand(o), newAuthWhoAmICommand(o), newAuthCanICommand(o))
	return cmd
}

func newAuthUserCommand(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Users: people or outside systems with credentials (cluster-admins manage them)"}
	var description string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a user (it has no role until a binding gives it one)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u := &apiv1.User{Metadata: &apiv1.ObjectMeta{Name: args[0]}, Spec: &apiv1.UserSpec{Description: description}}
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				_, err := c.Users.Create(cmd.Context(), &apiv1.CreateUserRequest{User: u})
				return printDone(cmd.OutOrStdout(), err, userResource, args[0], "created")
			})
		},
	}
	create.Flags().StringVar(&description, "description", "", "who or what the user is")
	list := &cobra.Command{
		Use:   "list",
		Short: "List users",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.listTable(cmd, userResource, "")
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a user: its credentials are revoked and it leaves every binding",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				_, err := c.Users.Delete(cmd.Context(), &apiv1.DeleteUserRequest{Name: args[0]})
				return printDone(cmd.OutOrStdout(), err, userResource, args[0], "deleted")
			})
		},
	}
	cmd.AddCommand(create, list, del, newUserDisableCommand(o, true), newUserDisableCommand(o, false))
	return cmd
}

// newUserDisableCommand is `user disable` (disable) or `user enable`.
func newUserDisableCommand(o *rootOptions, disable bool) *cobra.Command {
	verb, short := "enable", "Accept a disabled user's credentials again"
	if disable {
		verb, short = "disable", "Refuse a user's credentials until it is enabled again (they are not revoked)"
	}
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, name := cmd.Context(), args[0]
			return o.withClient(ctx, func(c *client.Client) error {
				err := updateRetrying(ctx, func(ctx context.Context) error {
					u, err := c.Users.Get(ctx, &apiv1.GetUserRequest{Name: name})
					if err != nil {
						return err
					}
					if u.Spec == nil {
						u.Spec = &apiv1.UserSpec{}
					}
					u.Spec.Disabled = disable
					_, err = c.Users.Update(ctx, &apiv1.UpdateUserRequest{User: u})
					return err
				})
				return printDone(cmd.OutOrStdout(), err, userResource, name, verb+"d")
			})
		},
	}
}

func newAuthServiceAccountCommand(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "serviceaccount",
		Aliases: []string{"sa"},
		Short:   "Service accounts: identities of one namespace for automation (its admins manage them)",
	}
	var description string
	create := &cobra.Command{
		Use:     "create NAME -n NAMESPACE",
		Short:   "Create a service account in the namespace",
		Example: "  virtplane-agent auth serviceaccount create deployer -n team-a --description 'CI pipeline'",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sa := &apiv1.ServiceAccount{
				Metadata: &apiv1.ObjectMeta{Namespace: o.namespace, Name: args[0]},
				Spec:     &apiv1.ServiceAccountSpec{Description: description},
			}
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				_, err := c.ServiceAccounts.Create(cmd.Context(), &apiv1.CreateServiceAccountRequest{ServiceAccount: sa})
				return printDone(cmd.OutOrStdout(), err, serviceAccountResource, args[0], "created")
			})
		},
	}
	create.Flags().StringVar(&description, "description", "", "what the account is for")
	var all bool
	list := &cobra.Command{
		Use:   "list [-n NAMESPACE | -A]",
		Short: "List the service accounts of the namespace",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns := o.namespace
			if all {
				ns = ""
			}
			return o.listTable(cmd, serviceAccountResource, ns)
		},
	}
	list.Flags().BoolVarP(&all, "all-namespaces", "A", false, "those of every namespace")
	del := &cobra.Command{
		Use:   "delete NAME -n NAMESPACE",
		Short: "Delete a service account and revoke its credentials",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := &apiv1.ObjectKey{Namespace: o.namespace, Name: args[0]}
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				_, err := c.ServiceAccounts.Delete(cmd.Context(), &apiv1.DeleteServiceAccountRequest{Key: key})
				return printDone(cmd.OutOrStdout(), err, serviceAccountResource, args[0], "deleted")
			})
		},
	}
	cmd.AddCommand(create, list, del)
	return cmd
}

// printDone prints "<singular>/<name> <what>" as apply does, or returns
// err as the terminal words it.
func printDone(out io.Writer, err error, res *resource, name, what string) error {
	if err != nil {
		return describeError(err, res, name)
	}
	_, err = fmt.Fprintf(out, "%s/%s %s\n", res.Singular, name, what)
	return err
}

// listTable prints the objects of res in namespace ("" all) as get does,
// with NAMESPACE when they come from several.
func (o *rootOptions) listTable(cmd *cobra.Command, res *resource, namespace string) error {
	return o.withClient(cmd.Context(), func(c *client.Client) error {
		items, err := listObjects(cmd.Context(), c, res, namespace, "")
		if err != nil {
			return describeError(err, nil, "")
		}
		return printObjects(cmd.OutOrStdout(), cmd.ErrOrStderr(), res, items, namespace)
	})
}

// printObjects is get's table of items of res listed in namespace.
func printObjects(out, errOut io.Writer, res *resource, items []object, namespace string) error {
	if len(items) == 0 {
		if !res.Namespaced {
			namespace = ""
		}
		_, err := fmt.Fprintln(errOut, noResources(namespace))
		return err
	}
	withNS := res.Namespaced && namespace == ""
	rows := make([][]string, len(items))
	now := time.Now()
	for i, it := range items {
		rows[i] = tableRow(res, it, now, withNS)
	}
	return printTable(out, tableHeader(res, withNS), rows)
}

// updateRetrying runs a read-modify-write until it does not conflict
// (Aborted: someone wrote in between), as apply's updates do.
func updateRetrying(ctx context.Context, write func(context.Context) error) error {
	var err error
	for range applyAttempts {
		if err = write(ctx); status.Code(err) != codes.Aborted {
			return err
		}
	}
	return err
}
