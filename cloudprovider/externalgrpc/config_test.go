package externalgrpc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/externalgrpc/protos"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name        string
		yaml        string
		wantErr     string
		wantTimeout time.Duration
	}{
		{name: "CA's example", yaml: "address: \"external-grpc-provider:8086\"\nkey: \"/etc/ssl/client-cert/tls.key\"\n" +
			"cert: \"/etc/ssl/client-cert/tls.crt\"\ncacert: \"/etc/ssl/client-cert/ca.crt\"\ngrpc_timeout: 10s\n", wantTimeout: 10 * time.Second},
		{name: "plaintext, default timeout", yaml: "address: 127.0.0.1:8086\n", wantTimeout: DefaultTimeout},
		{name: "template ConfigMap", yaml: "address: a:1\ntemplate_slices_config_map: kube-system/slices\n", wantTimeout: DefaultTimeout},
		{name: "no address", yaml: "cert: x\n", wantErr: "address is required"},
		{name: "address without port", yaml: "address: provider\n", wantErr: `address "provider": address provider: missing port in address`},
		{name: "misspelt field", yaml: "address: a:1\ncacrt: x\n", wantErr: `not an externalgrpc cloud-config: unknown field "cacrt"`},
		{name: "cert without key", yaml: "address: a:1\ncert: c\ncacert: ca\n", wantErr: "cert is set: key and cacert are required too"},
		{name: "key without cert", yaml: "address: a:1\nkey: k\n", wantErr: "key or cacert is set without cert"},
		{name: "zero timeout", yaml: "address: a:1\ngrpc_timeout: 0s\n", wantErr: "grpc_timeout must be positive"},
		{name: "bad ConfigMap reference", yaml: "address: a:1\ntemplate_slices_config_map: slices\n", wantErr: `template_slices_config_map "slices": want namespace/name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.yaml))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Timeout() != tt.wantTimeout {
				t.Errorf("timeout %s, want %s", c.Timeout(), tt.wantTimeout)
			}
		})
	}
}

func TestReadConfigNamesTheFile(t *testing.T) {
	if _, err := ReadConfig(""); err == nil || !strings.Contains(err.Error(), "--cloud-config is required") {
		t.Errorf("no file: %v", err)
	}
	if _, err := ReadConfig("/nonexistent/cloud.yaml"); err == nil || !strings.Contains(err.Error(), "/nonexistent/cloud.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

func TestDialBadCertificates(t *testing.T) {
	c := &Config{Address: "127.0.0.1:1", Cert: "/nonexistent/c.pem", Key: "/nonexistent/k.pem", Cacert: "/nonexistent/ca.pem"}
	if _, err := c.Dial(); err == nil || !strings.Contains(err.Error(), "cert /nonexistent/c.pem and key /nonexistent/k.pem") {
		t.Errorf("unreadable certificate: %v", err)
	}
}

func TestMapError(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantClass cloudprovider.ErrorClass
		wantCode  string
		wantNot   bool
		wantMsg   string
	}{
		{name: "out of resources", err: status.Error(codes.ResourceExhausted, "quota"), wantClass: cloudprovider.OutOfResourcesErrorClass,
			wantCode: "ResourceExhausted", wantMsg: "externalgrpc provider: M of node group g: quota"},
		{name: "unimplemented", err: status.Error(codes.Unimplemented, "x"), wantNot: true},
		{name: "unreachable", err: status.Error(codes.Unavailable, "connection refused"), wantClass: cloudprovider.OtherErrorClass,
			wantCode: "Unavailable", wantMsg: "service unreachable: connection refused"},
		{name: "timeout", err: status.Error(codes.DeadlineExceeded, "late"), wantClass: cloudprovider.OtherErrorClass, wantCode: "DeadlineExceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mapError("M", "g", tt.err)
			if tt.wantNot {
				if !errors.Is(err, cloudprovider.ErrNotImplemented) {
					t.Fatalf("%v, want ErrNotImplemented", err)
				}
				return
			}
			if cloudprovider.ClassOf(err) != tt.wantClass || cloudprovider.CodeOf(err) != tt.wantCode || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("%v: class %s code %s, want %s %s with %q", err, cloudprovider.ClassOf(err), cloudprovider.CodeOf(err), tt.wantClass, tt.wantCode, tt.wantMsg)
			}
		})
	}
	if mapError("M", "", nil) != nil {
		t.Error("nil error mapped to non-nil")
	}
}

func TestInstanceStatus(t *testing.T) {
	tests := []struct {
		name string
		in   *protos.InstanceStatus
		want *cloudprovider.InstanceStatus
	}{
		{name: "unknown", in: nil, want: nil},
		{name: "unspecified", in: &protos.InstanceStatus{}, want: nil},
		{name: "running", in: &protos.InstanceStatus{InstanceState: protos.InstanceStatus_instanceRunning},
			want: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}},
		{name: "deleting", in: &protos.InstanceStatus{InstanceState: protos.InstanceStatus_instanceDeleting},
			want: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting}},
		{name: "failed out of resources", in: &protos.InstanceStatus{InstanceState: protos.InstanceStatus_instanceCreating,
			ErrorInfo: &protos.InstanceErrorInfo{ErrorCode: "ZONE_RESOURCE_POOL_EXHAUSTED", ErrorMessage: "no capacity", InstanceErrorClass: 1}},
			want: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating, ErrorInfo: &cloudprovider.InstanceErrorInfo{
				ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "ZONE_RESOURCE_POOL_EXHAUSTED", ErrorMessage: "no capacity"}}},
		{name: "failed, other class", in: &protos.InstanceStatus{InstanceState: protos.InstanceStatus_instanceCreating,
			ErrorInfo: &protos.InstanceErrorInfo{ErrorCode: "BOOT", InstanceErrorClass: 99}},
			want: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating, ErrorInfo: &cloudprovider.InstanceErrorInfo{
				ErrorClass: cloudprovider.OtherErrorClass, ErrorCode: "BOOT"}}},
		{name: "error info without a code is none, as in CA", in: &protos.InstanceStatus{InstanceState: protos.InstanceStatus_instanceCreating,
			ErrorInfo: &protos.InstanceErrorInfo{ErrorMessage: "?"}},
			want: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := instanceStatus(tt.in)
			if (got == nil) != (tt.want == nil) || got != nil && (got.State != tt.want.State ||
				(got.ErrorInfo == nil) != (tt.want.ErrorInfo == nil) || got.ErrorInfo != nil && *got.ErrorInfo != *tt.want.ErrorInfo) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseTemplateConfig(t *testing.T) {
	tests := []struct {
		name    string
		data    map[string]string
		wantErr string
	}{
		{name: "neither id nor expression", data: map[string]string{"k": "resourceSlices: [{driver: d, devices: [{name: a}]}]"},
			wantErr: `ConfigMap ns/cm key "k": exactly one of nodeGroup and nodeGroupRegexp is required`},
		{name: "no slices", data: map[string]string{"k": "nodeGroup: g"}, wantErr: `ConfigMap ns/cm key "k": resourceSlices is required`},
		{name: "bad expression", data: map[string]string{"k": "nodeGroupRegexp: '('\nresourceSlices: [{driver: d, devices: [{name: a}]}]"},
			wantErr: `ConfigMap ns/cm key "k": nodeGroupRegexp: error parsing regexp`},
		{name: "unknown field", data: map[string]string{"k": "nodeGroup: g\nslices: []"}, wantErr: `ConfigMap ns/cm key "k": unknown field "slices" (want nodeGroup or nodeGroupRegexp, and resourceSlices)`},
		{name: "same group twice", data: map[string]string{"a": "nodeGroup: g\nresourceSlices: [{driver: d, devices: [{name: a}]}]",
			"b": "nodeGroup: g\nresourceSlices: [{driver: d, devices: [{name: a}]}]"}, wantErr: `key "b": node group g is already given by key "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTemplateConfig("ConfigMap ns/cm", tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
	c, err := ParseTemplateConfig("ConfigMap ns/cm", map[string]string{
		"exact": "nodeGroup: gpu-a\nresourceSlices: [{driver: exact.example.com, devices: [{name: a}]}]",
		"any":   "nodeGroupRegexp: gpu-.*\nresourceSlices: [{driver: any.example.com, devices: [{name: a}]}]",
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"gpu-a": "exact.example.com", "gpu-b": "any.example.com", "cpu": "", "x-gpu-b": ""} {
		specs, err := c.For(id)
		got := ""
		if len(specs) > 0 {
			got = specs[0].Driver
		}
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q (an expression matches the whole id)", id, got, err, want)
		}
	}
}
