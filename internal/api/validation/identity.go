package validation

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Identities and role bindings (tenancy.proto).
const (
	// MaxDescription bounds the description of a user, service account
	// or credential: a line for people, not data.
	MaxDescription = 1024
	// MaxBindingSubjects bounds one binding's subjects: every call
	// resolves roles by subject, and groups of people belong in several
	// bindings or a namespace of their own.
	MaxBindingSubjects = 256
	// DefaultCredentialTTL is a credential's life when the request sets
	// none; MaxCredentialTTL the longest one may ask.
	DefaultCredentialTTL = 90 * 24 * time.Hour
	MaxCredentialTTL     = 2 * 365 * 24 * time.Hour
)

// NamespaceRoles are the roles a RoleBinding may give; ClusterRoles
// those of a ClusterRoleBinding.
var (
	NamespaceRoles = []string{apiv1.RoleAdmin, apiv1.RoleEdit, apiv1.RoleView}
	ClusterRoles   = []string{apiv1.RoleClusterAdmin, apiv1.RoleAdmin, apiv1.RoleEdit, apiv1.RoleView}
)

// ValidateUser checks a user. Its name is a DNS label, as every subject's
// is: it appears in tokens' subjects and certificates' common names,
// which a dot or colon would make ambiguous.
func ValidateUser(u *apiv1.User) field.ErrorList {
	errs := ValidateObjectMeta(u.GetMetadata(), false, field.NewPath("metadata"))
	if n := u.GetMetadata().GetName(); n != "" {
		errs = append(errs, dns1123Label(n, field.NewPath("metadata", "name"))...)
	}
	return append(errs, validateDescription(u.GetSpec().GetDescription(), field.NewPath("spec", "description"))...)
}

// ValidateServiceAccount checks a service account.
func ValidateServiceAccount(sa *apiv1.ServiceAccount) field.ErrorList {
	errs := ValidateObjectMeta(sa.GetMetadata(), true, field.NewPath("metadata"))
	return append(errs, validateDescription(sa.GetSpec().GetDescription(), field.NewPath("spec", "description"))...)
}

func validateDescription(d string, path *field.Path) field.ErrorList {
	if len(d) > MaxDescription {
		return field.ErrorList{field.TooLong(path, "", MaxDescription)}
	}
	return nil
}

// ValidateSubject checks whom a binding or credential names: a user by
// name, or a service account by namespace and name.
func ValidateSubject(s *apiv1.Subject, path *field.Path) field.ErrorList {
	if s == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	switch s.GetKind() {
	case apiv1.SubjectUser:
		if s.GetNamespace() != "" {
			errs = append(errs, field.Forbidden(path.Child("namespace"), "users are cluster-wide: no namespace"))
		}
	case apiv1.SubjectServiceAccount:
		if s.GetNamespace() == "" {
			errs = append(errs, field.Required(path.Child("namespace"), "a service account's namespace"))
		} else {
			errs = append(errs, dns1123Label(s.GetNamespace(), path.Child("namespace"))...)
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("kind"), s.GetKind(), []string{apiv1.SubjectUser, apiv1.SubjectServiceAccount}))
	}
	if s.GetName() == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	} else {
		errs = append(errs, dns1123Label(s.GetName(), path.Child("name"))...)
	}
	return errs
}

// ValidateRoleBinding checks a namespace's role binding.
func ValidateRoleBinding(rb *apiv1.RoleBinding) field.ErrorList {
	errs := ValidateObjectMeta(rb.GetMetadata(), true, field.NewPath("metadata"))
	return append(errs, validateBindingSpec(rb.GetSpec(), NamespaceRoles, field.NewPath("spec"))...)
}

// ValidateClusterRoleBinding checks a cluster role binding.
func ValidateClusterRoleBinding(b *apiv1.ClusterRoleBinding) field.ErrorList {
	errs := ValidateObjectMeta(b.GetMetadata(), false, field.NewPath("metadata"))
	return append(errs, validateBindingSpec(b.GetSpec(), ClusterRoles, field.NewPath("spec"))...)
}

func validateBindingSpec(spec *apiv1.RoleBindingSpec, roles []string, path *field.Path) field.ErrorList {
	if spec == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	if !slices.Contains(roles, spec.GetRole()) {
		errs = append(errs, field.NotSupported(path.Child("role"), spec.GetRole(), roles))
	}
	subs := spec.GetSubjects()
	switch {
	case len(subs) == 0:
		errs = append(errs, field.Required(path.Child("subjects"), "at least one subject"))
	case len(subs) > MaxBindingSubjects:
		return append(errs, field.TooMany(path.Child("subjects"), len(subs), MaxBindingSubjects))
	}
	seen := map[string]bool{}
	for i, s := range subs {
		p := path.Child("subjects").Index(i)
		errs = append(errs, ValidateSubject(s, p)...)
		key := s.GetKind() + "/" + s.GetNamespace() + "/" + s.GetName()
		if seen[key] {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s %s", s.GetKind(), s.GetName())))
		}
		seen[key] = true
	}
	return errs
}

// CredentialTTL is the life of a credential a request asks for:
// DefaultCredentialTTL for 0, at most MaxCredentialTTL.
func CredentialTTL(seconds int64, path *field.Path) (time.Duration, field.ErrorList) {
	switch {
	case seconds == 0:
		return DefaultCredentialTTL, nil
	case seconds < 0 || seconds > int64(MaxCredentialTTL/time.Second):
		return 0, field.ErrorList{field.Invalid(path, seconds, fmt.Sprintf("must be between 1 and %d (2 years), or 0 for 90 days", int64(MaxCredentialTTL/time.Second)))}
	}
	return time.Duration(seconds) * time.Second, nil
}

// ValidateIssue checks a request for a credential of subject.
func ValidateIssue(subject *apiv1.Subject, ttlSeconds int64, description string) (time.Duration, field.ErrorList) {
	errs := ValidateSubject(subject, field.NewPath("subject"))
	ttl, terrs := CredentialTTL(ttlSeconds, field.NewPath("ttl_seconds"))
	errs = append(errs, terrs...)
	return ttl, append(errs, validateDescription(description, field.NewPath("description"))...)
}
