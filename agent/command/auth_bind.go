package command

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// auth bind, unbind, bindings, whoami, can-i.

// namespaceRoles and clusterRoles are what a binding may give (apiv1's
// Role* constants): the server decides, these only word the flag's help.
var (
	namespaceRoles = []string{apiv1.RoleAdmin, apiv1.RoleEdit, apiv1.RoleView}
	clusterRoles   = []string{apiv1.RoleClusterAdmin, apiv1.RoleAdmin, apiv1.RoleEdit, apiv1.RoleView}
)

func newAuthBindCommand(o *rootOptions) *cobra.Command {
	var (
		f             subjectFlags
		role, name    string
		cluster       bool
		namespaceHelp = strings.Join(namespaceRoles, "|")
	)
	cmd := &cobra.Command{
		Use:   "bind --role ROLE (-n NAMESPACE | --cluster) (--user NAME | --service-account NAMESPACE/NAME) [--name NAME]",
		Short: "Give a user or service account a role in a namespace (or everywhere, --cluster)",
		Long: `Make a role binding: the subject gets ROLE in the namespace (` + namespaceHelp + `),
or with --cluster a cluster role binding (` + strings.Join(clusterRoles, "|") + `:
admin, edit and view then hold in every namespace). view reads; edit manages
VMs, pools, snapshots, backups, migrations and consoles; admin also the
namespace's service accounts, their tokens and its bindings. The binding's
name is ROLE-user-NAME or ROLE-sa-NAMESPACE-NAME unless --name says.`,
		Example: `  virtplane-agent auth bind --role edit -n team-a --service-account team-a/deployer
  virtplane-agent auth bind --role admin -n team-a --user alice
  virtplane-agent auth bind --cluster --role view --user auditor`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			subject, err := f.subject()
			if err != nil {
				return err
			}
			if role == "" {
				return fmt.Errorf("--role is required: %s", orList(clusterRoles))
			}
			if name == "" {
				name = bindingName(role, subject)
			}
			spec := &apiv1.RoleBindingSpec{Role: role, Subjects: []*apiv1.Subject{subject}}
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				if cluster {
					b := &apiv1.ClusterRoleBinding{Metadata: &apiv1.ObjectMeta{Name: name}, Spec: spec}
					_, err := c.ClusterRoleBindings.Create(cmd.Context(), &apiv1.CreateClusterRoleBindingRequest{ClusterRoleBinding: b})
					return printDone(cmd.OutOrStdout(), err, clusterRoleBindingResource, name, "created")
				}
				b := &apiv1.RoleBinding{Metadata: &apiv1.ObjectMeta{Namespace: o.namespace, Name: name}, Spec: spec}
				_, err := c.RoleBindings.Create(cmd.Context(), &apiv1.CreateRoleBindingRequest{RoleBinding: b})
				return printDone(cmd.OutOrStdout(), err, roleBindingResource, name, "created")
			})
		},
	}
	f.add(cmd, "the role")
	fl := cmd.Flags()
	fl.StringVar(&role, "role", "", "the role: "+strings.Join(clusterRoles, ", ")+" (cluster-admin only with --cluster)")
	fl.StringVar(&name, "name", "", "the binding's name (default ROLE-user-NAME or ROLE-sa-NAMESPACE-NAME)")
	fl.BoolVar(&cluster, "cluster", false, "a cluster role binding: the role in every namespace (cluster-admins make them)")
	return cmd
}

// bindingName is a binding's default name: edit-user-alice,
// edit-sa-ci-deployer.
func bindingName(role string, s *apiv1.Subject) string {
	if s.GetKind() == apiv1.SubjectServiceAccount {
		return role + "-sa-" + s.GetNamespace() + "-" + s.GetName()
	}
	return role + "-user-" + s.GetName()
}

func newAuthUnbindCommand(o *rootOptions) *cobra.Command {
	var cluster bool
	cmd := &cobra.Command{
		Use:   "unbind NAME (-n NAMESPACE | --cluster)",
		Short: "Delete a role binding (its subjects lose the role at once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				if cluster {
					_, err := c.ClusterRoleBindings.Delete(cmd.Context(), &apiv1.DeleteClusterRoleBindingRequest{Name: name})
					return printDone(cmd.OutOrStdout(), err, clusterRoleBindingResource, name, "deleted")
				}
				_, err := c.RoleBindings.Delete(cmd.Context(), &apiv1.DeleteRoleBindingRequest{Key: &apiv1.ObjectKey{Namespace: o.namespace, Name: name}})
				return printDone(cmd.OutOrStdout(), err, roleBindingResource, name, "deleted")
			})
		},
	}
	cmd.Flags().BoolVar(&cluster, "cluster", false, "a cluster role binding")
	return cmd
}

func newAuthBindingsCommand(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "bindings", Short: "Role bindings"}
	var all bool
	list := &cobra.Command{
		Use:   "list [-n NAMESPACE | -A]",
		Short: "List the role bindings of the namespace (all of them with -A) and, with -A, the cluster role bindings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns := o.namespace
			if all {
				ns = ""
			}
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				var rows [][]string
				rbs, err := listObjects(cmd.Context(), c, roleBindingResource, ns, "")
				if err != nil {
					return describeError(err, nil, "")
				}
				for _, b := range rbs {
					rb := b.(*apiv1.RoleBinding)
					rows = append(rows, []string{rb.GetMetadata().GetNamespace(), rb.GetMetadata().GetName(), rb.GetSpec().GetRole(), subjectsCell(rb.GetSpec().GetSubjects())})
				}
				if all {
					crbs, err := listObjects(cmd.Context(), c, clusterRoleBindingResource, "", "")
					if err != nil {
						return describeError(err, nil, "")
					}
					for _, b := range crbs {
						crb := b.(*apiv1.ClusterRoleBinding)
						rows = append(rows, []string{"<cluster>", crb.GetMetadata().GetName(), crb.GetSpec().GetRole(), subjectsCell(crb.GetSpec().GetSubjects())})
					}
				}
				if len(rows) == 0 {
					_, err := fmt.Fprintln(cmd.ErrOrStderr(), noResources(ns))
					return err
				}
				return printTable(cmd.OutOrStdout(), []string{"NAMESPACE", "NAME", "ROLE", "SUBJECTS"}, rows)
			})
		},
	}
	list.Flags().BoolVarP(&all, "all-namespaces", "A", false, "every namespace's and the cluster role bindings")
	cmd.AddCommand(list)
	return cmd
}

func newAuthWhoAmICommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Who the server takes the caller for, and its roles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				resp, err := c.Auth.WhoAmI(cmd.Context(), &apiv1.WhoAmIRequest{})
				if err != nil {
					return describeError(err, nil, "")
				}
				rows := [][]string{{"identity:", cell(resp.GetIdentity())}}
				if resp.GetCredential() != "" {
					rows = append(rows, []string{"credential:", resp.GetCredential()})
				}
				if resp.GetExpires() != nil {
					rows = append(rows, []string{"expires:", timestampCell(resp.GetExpires())})
				}
				roles := slices.Clone(resp.GetRoles())
				rows = append(rows, []string{"roles:", cell(strings.Join(roles, ", "))})
				return printTable(cmd.OutOrStdout(), rows[0], rows[1:])
			})
		},
	}
}

func newAuthCanICommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "can-i METHOD [-n NAMESPACE]",
		Short: "Whether the caller may call a method in the namespace: prints yes, or no and exits 1 with the role that would allow it",
		Example: `  virtplane-agent auth can-i VirtualMachines.Create -n team-a
  virtplane-agent auth can-i /virtplane.v1.StorageClasses/Create`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				resp, err := c.Auth.CanI(cmd.Context(), &apiv1.CanIRequest{Method: args[0], Namespace: o.namespace})
				if err != nil {
					return describeError(err, nil, "")
				}
				if resp.GetAllowed() {
					_, err := fmt.Fprintln(cmd.OutOrStdout(), "yes")
					return err
				}
				if _, err := fmt.Fprintln(cmd.OutOrStdout(), "no"); err != nil {
					return err
				}
				// The exit status says no to scripts; the reason is the
				// server's, as a refusal of the call would say it.
				return fmt.Errorf("%s", cell(resp.GetReason()))
			})
		},
	}
}
