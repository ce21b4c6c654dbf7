package externalgrpc

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"draxr.dev/draxr/cloudprovider"
	egrpc "draxr.dev/draxr/cloudprovider/externalgrpc"
	"draxr.dev/draxr/cloudprovider/externalgrpc/protos"
	"draxr.dev/draxr/cloudprovider/local"
	"draxr.dev/draxr/simulator/nodegroup"
)

// The provider reaches the service over mTLS with the cloud-config's
// files; a client certificate the service's CA did not sign is refused,
// and the error says the service could not be reached and why.
func TestMutualTLS(t *testing.T) {
	certs, err := NewCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	creds, err := certs.ServerCreds()
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	lp, err := local.New(local.Options{Client: client, Groups: []*nodegroup.NodeGroup{pool("p", false)}})
	if err != nil {
		t.Fatal(err)
	}
	addr, stop, err := New(lp, Options{}).Start(creds)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, tt := range []struct {
		name      string
		cert, key string
		wantErr   string
	}{
		{name: "signed by the service's CA", cert: certs.ClientCert, key: certs.ClientKey},
		{name: "signed by another CA", cert: certs.WrongCert, key: certs.WrongKey,
			wantErr: "externalgrpc provider: Refresh: service unreachable: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &egrpc.Config{Address: addr, Cert: tt.cert, Key: tt.key, Cacert: certs.CA}
			conn, err := cfg.Dial()
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			p, err := egrpc.New(egrpc.Options{Client: protos.NewCloudProviderClient(conn), Kube: client})
			if err != nil {
				t.Fatal(err)
			}
			err = p.Refresh(context.Background())
			if tt.wantErr == "" {
				if err != nil || len(p.NodeGroups()) != 1 {
					t.Fatalf("Refresh: %v, %d groups; want 1", err, len(p.NodeGroups()))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "client certificate "+tt.cert+" is not one the service accepts") ||
				cloudprovider.CodeOf(err) != "Unavailable" {
				t.Fatalf("Refresh with a wrong certificate: %v; want %q about the certificate", err, tt.wantErr)
			}
			t.Logf("refused: %v", err)
		})
	}
}
