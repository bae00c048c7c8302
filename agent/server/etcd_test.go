package server

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver/etcdtest"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
)

// etcd flags that cannot work, or would open the store, are refused
// naming the flag.
func TestValidateEtcdFlags(t *testing.T) {
	checkValidate(t, []validateCase{
		{"https listener", func(o *Options) { o.EtcdListenClient = []string{"https://127.0.0.1:2379"} }, ""},
		{"plain http listener", func(o *Options) { o.EtcdListenClient = []string{"http://127.0.0.1:2379"} }, "--etcd-listen-client: client URL \"http://127.0.0.1:2379\": http:// serves etcd with no TLS and no authentication"},
		{"plain unix listener", func(o *Options) { o.EtcdListenClient = []string{"unix:///tmp/etcd.sock"} }, "--etcd-listen-client"},
		{"listener with an external cluster", func(o *Options) {
			o.EtcdListenClient, o.EtcdEndpoints = []string{"https://127.0.0.1:2379"}, []string{"https://10.0.0.1:2379"}
		}, "--etcd-listen-client applies to the embedded etcd only"},
		{"default quota", func(*Options) {}, ""},
		{"quota at the floor", func(o *Options) { o.EtcdQuotaBytes = 64 << 20 }, ""},
		{"quota too small", func(o *Options) { o.EtcdQuotaBytes = 1 << 20 }, "--etcd-quota-bytes (1048576) must be at least"},
		{"negative quota", func(o *Options) { o.EtcdQuotaBytes = -1 }, "--etcd-quota-bytes"},
		{"negative compaction", func(o *Options) { o.EtcdCompaction = -time.Minute }, "--etcd-compaction"},
	})
}

// --etcd-listen-client serves the store only to the operator's
// certificate of the etcd CA generated in <data-dir>/pki/etcd: not to
// anyone who reaches the port, nor to the agent's own TLS material or a
// node's certificate (both signed by the agent CA). Before, it served
// plain http to any local user, who read cloud-init passwords.
func TestEtcdListenClientRequiresTheEtcdClientCertificate(t *testing.T) {
	a := startAgent(t, Options{EtcdListenClient: []string{"https://127.0.0.1:0"}})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Endpoint: "unix://" + a.opts.Socket})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const password = "chpasswd: {list: 'root:hunter2'}"
	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Name: "secret"},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: apiv1.RunStrategyHalted,
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{
				Domain: &apiv1.DomainSpec{
					Memory:  &apiv1.Memory{Guest: "64Mi"},
					Devices: &apiv1.Devices{Disks: []*apiv1.Disk{{Name: "seed", Cdrom: &apiv1.CDRomTarget{Bus: "sata"}}}},
				},
				Volumes: []*apiv1.Volume{{Name: "seed", CloudInitNoCloud: &apiv1.CloudInitNoCloud{UserData: "#cloud-config\n" + password}}},
			}},
		},
	}
	if _, err := c.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatal(err)
	}
	key := a.opts.EtcdPrefix + "/registry/virtualmachines/default/secret"
	if _, err := a.client.Get(ctx, key); err != nil {
		t.Fatal(err)
	}
	addrs := a.etcd.ExtraAddrs()
	if len(addrs) != 1 {
		t.Fatalf("extra etcd listeners %v", addrs)
	}
	ep := "https://" + addrs[0].String()

	pkiDir := filepath.Join(a.opts.DataDir, "pki")
	p := pki.EtcdPathsIn(pkiDir)
	for _, f := range []string{p.CAKey, p.ServerKey, p.ClientKey} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, st.Mode(), err)
		}
	}
	// Present cert whatever CAs the server asks for.
	presenting := func(cert tls.Certificate) *tls.Config {
		cfg := etcdtest.Trusting(t, p.CACert)
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
		return cfg
	}

	operator, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := etcdtest.Get(t, ep, presenting(operator), key); err != nil || !strings.Contains(v, password) {
		t.Fatalf("with the operator certificate: %q %v", v, err)
	}
	if v, err := etcdtest.Get(t, ep, etcdtest.Trusting(t, p.CACert), key); err == nil {
		t.Fatalf("without a certificate: read %q", v)
	}
	agentPaths := pki.PathsIn(pkiDir)
	agentPair, err := tls.LoadX509KeyPair(agentPaths.ServerCert, agentPaths.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := etcdtest.Get(t, ep, presenting(agentPair), key); err == nil {
		t.Fatalf("with a certificate of the agent CA: read %q", v)
	}
	if v, err := etcdtest.Get(t, strings.Replace(ep, "https://", "http://", 1), nil, key); err == nil {
		t.Fatalf("over plain http: read %q", v)
	}
}

// --etcd-quota-bytes reaches the embedded member, and the usage the
// quota guard and /metrics read is measured against it.
func TestEtcdQuotaReachesTheMember(t *testing.T) {
	const quota = 128 << 20
	a := startAgent(t, Options{EtcdQuotaBytes: quota})
	if got := a.etcd.Quota(); got != quota {
		t.Fatalf("embedded etcd quota %d, want %d", got, quota)
	}
	u, err := a.storageUsage().Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if u.Quota != quota || u.DBSize <= 0 || u.InUse <= 0 {
		t.Fatalf("usage %+v", u)
	}
	if d := startAgent(t, Options{}); d.etcd.Quota() != 2<<30 {
		t.Fatalf("default quota %d, want 2 GiB", d.etcd.Quota())
	}
}
