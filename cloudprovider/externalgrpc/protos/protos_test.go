package protos

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The protocol as CA defines it (cluster-autoscaler/cloudprovider/
// externalgrpc/protos/externalgrpc.proto): a renamed or renumbered field
// would silently talk past CA's services.
func TestWireProtocolIsCAs(t *testing.T) {
	fd := File_externalgrpc_proto
	if got := fd.Package(); got != "clusterautoscaler.cloudprovider.v1.externalgrpc" {
		t.Fatalf("package %s", got)
	}
	svc := fd.Services().ByName("CloudProvider")
	if svc == nil {
		t.Fatal("no service CloudProvider")
	}
	methods := map[string][2]string{
		"NodeGroups":                  {"NodeGroupsRequest", "NodeGroupsResponse"},
		"NodeGroupForNode":            {"NodeGroupForNodeRequest", "NodeGroupForNodeResponse"},
		"PricingNodePrice":            {"PricingNodePriceRequest", "PricingNodePriceResponse"},
		"PricingPodPrice":             {"PricingPodPriceRequest", "PricingPodPriceResponse"},
		"GPULabel":                    {"GPULabelRequest", "GPULabelResponse"},
		"GetAvailableGPUTypes":        {"GetAvailableGPUTypesRequest", "GetAvailableGPUTypesResponse"},
		"Cleanup":                     {"CleanupRequest", "CleanupResponse"},
		"Refresh":                     {"RefreshRequest", "RefreshResponse"},
		"NodeGroupTargetSize":         {"NodeGroupTargetSizeRequest", "NodeGroupTargetSizeResponse"},
		"NodeGroupIncreaseSize":       {"NodeGroupIncreaseSizeRequest", "NodeGroupIncreaseSizeResponse"},
		"NodeGroupDeleteNodes":        {"NodeGroupDeleteNodesRequest", "NodeGroupDeleteNodesResponse"},
		"NodeGroupDecreaseTargetSize": {"NodeGroupDecreaseTargetSizeRequest", "NodeGroupDecreaseTargetSizeResponse"},
		"NodeGroupNodes":              {"NodeGroupNodesRequest", "NodeGroupNodesResponse"},
		"NodeGroupTemplateNodeInfo":   {"NodeGroupTemplateNodeInfoRequest", "NodeGroupTemplateNodeInfoResponse"},
		"NodeGroupGetOptions":         {"NodeGroupAutoscalingOptionsRequest", "NodeGroupAutoscalingOptionsResponse"},
	}
	if svc.Methods().Len() != len(methods) {
		t.Errorf("%d methods, want %d", svc.Methods().Len(), len(methods))
	}
	for name, io := range methods {
		m := svc.Methods().ByName(protoreflect.Name(name))
		if m == nil {
			t.Errorf("no method %s", name)
			continue
		}
		if string(m.Input().Name()) != io[0] || string(m.Output().Name()) != io[1] {
			t.Errorf("%s(%s) %s, want (%s) %s", name, m.Input().Name(), m.Output().Name(), io[0], io[1])
		}
	}
	type field struct {
		number   protoreflect.FieldNumber
		kind     protoreflect.Kind
		repeated bool
	}
	str, i32, dbl, byt, msg, boo, enm := protoreflect.StringKind, protoreflect.Int32Kind, protoreflect.DoubleKind,
		protoreflect.BytesKind, protoreflect.MessageKind, protoreflect.BoolKind, protoreflect.EnumKind
	fields := map[string]map[string]field{
		"NodeGroup":                           {"id": {1, str, false}, "minSize": {2, i32, false}, "maxSize": {3, i32, false}, "debug": {4, str, false}},
		"ExternalGrpcNode":                    {"providerID": {1, str, false}, "name": {2, str, false}, "labels": {3, msg, true}, "annotations": {4, msg, true}},
		"NodeGroupsResponse":                  {"nodeGroups": {1, msg, true}},
		"NodeGroupForNodeRequest":             {"node": {1, msg, false}},
		"NodeGroupForNodeResponse":            {"nodeGroup": {1, msg, false}},
		"PricingNodePriceRequest":             {"node": {1, msg, false}, "startTimestamp": {4, msg, false}, "endTimestamp": {5, msg, false}},
		"PricingNodePriceResponse":            {"price": {1, dbl, false}},
		"PricingPodPriceRequest":              {"pod_bytes": {4, byt, false}, "startTimestamp": {5, msg, false}, "endTimestamp": {6, msg, false}},
		"PricingPodPriceResponse":             {"price": {1, dbl, false}},
		"GPULabelResponse":                    {"label": {1, str, false}},
		"GetAvailableGPUTypesResponse":        {"gpuTypes": {1, msg, true}},
		"NodeGroupTargetSizeRequest":          {"id": {1, str, false}},
		"NodeGroupTargetSizeResponse":         {"targetSize": {1, i32, false}},
		"NodeGroupIncreaseSizeRequest":        {"delta": {1, i32, false}, "id": {2, str, false}},
		"NodeGroupDeleteNodesRequest":         {"nodes": {1, msg, true}, "id": {2, str, false}},
		"NodeGroupDecreaseTargetSizeRequest":  {"delta": {1, i32, false}, "id": {2, str, false}},
		"NodeGroupNodesRequest":               {"id": {1, str, false}},
		"NodeGroupNodesResponse":              {"instances": {1, msg, true}},
		"Instance":                            {"id": {1, str, false}, "status": {2, msg, false}},
		"InstanceStatus":                      {"instanceState": {1, enm, false}, "errorInfo": {2, msg, false}},
		"InstanceErrorInfo":                   {"errorCode": {1, str, false}, "errorMessage": {2, str, false}, "instanceErrorClass": {3, i32, false}},
		"NodeGroupTemplateNodeInfoRequest":    {"id": {1, str, false}},
		"NodeGroupTemplateNodeInfoResponse":   {"nodeBytes": {2, byt, false}, "resourceSlices": {3, byt, true}},
		"NodeGroupAutoscalingOptionsRequest":  {"id": {1, str, false}, "defaults": {2, msg, false}},
		"NodeGroupAutoscalingOptionsResponse": {"nodeGroupAutoscalingOptions": {1, msg, false}},
		"NodeGroupAutoscalingOptions": {"scaleDownUtilizationThreshold": {1, dbl, false}, "scaleDownGpuUtilizationThreshold": {2, dbl, false},
			"zeroOrMaxNodeScaling": {6, boo, false}, "ignoreDaemonSetsUtilization": {7, boo, false}, "scaleDownUnneededDuration": {8, msg, false},
			"scaleDownUnreadyDuration": {9, msg, false}, "MaxNodeProvisionDuration": {10, msg, false}},
	}
	for mname, want := range fields {
		md := fd.Messages().ByName(protoreflect.Name(mname))
		if md == nil {
			t.Errorf("no message %s", mname)
			continue
		}
		if md.Fields().Len() != len(want) {
			t.Errorf("%s has %d fields, want %d", mname, md.Fields().Len(), len(want))
		}
		for fname, w := range want {
			f := md.Fields().ByName(protoreflect.Name(fname))
			if f == nil {
				t.Errorf("%s: no field %s", mname, fname)
				continue
			}
			if f.Number() != w.number || f.Kind() != w.kind || (f.Cardinality() == protoreflect.Repeated) != w.repeated {
				t.Errorf("%s.%s = %d %s repeated=%v, want %d %s repeated=%v", mname, fname, f.Number(), f.Kind(),
					f.Cardinality() == protoreflect.Repeated, w.number, w.kind, w.repeated)
			}
		}
	}
	states := fd.Messages().ByName("InstanceStatus").Enums().ByName("InstanceState").Values()
	for i, name := range []string{"unspecified", "instanceRunning", "instanceCreating", "instanceDeleting"} {
		if v := states.ByName(protoreflect.Name(name)); v == nil || int(v.Number()) != i {
			t.Errorf("InstanceState %s: %v, want %d", name, v, i)
		}
	}
}

// oldTemplateResponse is NodeGroupTemplateNodeInfoResponse as CA (and
// every service built from its repository) knows it: without field 3.
func oldTemplateResponse(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	fdp := protodesc.ToFileDescriptorProto(File_externalgrpc_proto)
	for _, m := range fdp.MessageType {
		if m.GetName() != "NodeGroupTemplateNodeInfoResponse" {
			continue
		}
		kept := m.Field[:0]
		for _, f := range m.Field {
			if f.GetNumber() != 3 {
				kept = append(kept, f)
			}
		}
		m.Field = kept
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().ByName("NodeGroupTemplateNodeInfoResponse")
}

// resourceSlices is an addition both ways: CA's client reads a draxr-aware
// service's answer (the slices skipped as unknown) and draxr reads an old
// service's (no slices).
func TestResourceSlicesFieldIsCompatible(t *testing.T) {
	old := oldTemplateResponse(t)
	node := []byte("node")
	b, err := proto.Marshal(&NodeGroupTemplateNodeInfoResponse{NodeBytes: node, ResourceSlices: [][]byte{[]byte("slice")}})
	if err != nil {
		t.Fatal(err)
	}
	oldRead := dynamicpb.NewMessage(old)
	if err := proto.Unmarshal(b, oldRead); err != nil {
		t.Fatalf("an old client cannot read a new answer: %v", err)
	}
	if got := oldRead.Get(old.Fields().ByName("nodeBytes")).Bytes(); !bytes.Equal(got, node) {
		t.Errorf("old client read nodeBytes %q, want %q", got, node)
	}
	if len(oldRead.GetUnknown()) == 0 {
		t.Error("the slices did not reach the old client as an unknown field")
	}
	oldAnswer := dynamicpb.NewMessage(old)
	oldAnswer.Set(old.Fields().ByName("nodeBytes"), protoreflect.ValueOfBytes(node))
	b, err = proto.Marshal(oldAnswer)
	if err != nil {
		t.Fatal(err)
	}
	var newRead NodeGroupTemplateNodeInfoResponse
	if err := proto.Unmarshal(b, &newRead); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(newRead.NodeBytes, node) || len(newRead.ResourceSlices) != 0 {
		t.Errorf("old answer read as nodeBytes %q, %d slices; want %q and none", newRead.NodeBytes, len(newRead.ResourceSlices), node)
	}
}

// The committed Go code is what make protos generates from the .proto.
// It needs protoc, which CI machines do not have; the plugins come from
// Go modules.
func TestGeneratedCodeUpToDate(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc is not installed (Debian: apt-get install protobuf-compiler); the generated code is not checked")
	}
	mk, err := os.ReadFile("../../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PROTOC_GEN_GO_GRPC_VERSION = (\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile sets no PROTOC_GEN_GO_GRPC_VERSION")
	}
	bin, out := t.TempDir(), t.TempDir()
	run := func(env []string, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), env...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, b)
		}
	}
	run(nil, "go", "build", "-o", filepath.Join(bin, "protoc-gen-go"), "google.golang.org/protobuf/cmd/protoc-gen-go")
	run([]string{"GOBIN=" + bin}, "go", "install", "google.golang.org/grpc/cmd/protoc-gen-go-grpc@"+string(m[1]))
	run(nil, "protoc", "--plugin=protoc-gen-go="+filepath.Join(bin, "protoc-gen-go"),
		"--plugin=protoc-gen-go-grpc="+filepath.Join(bin, "protoc-gen-go-grpc"), "-I", ".",
		"--go_out="+out, "--go_opt=paths=source_relative", "--go-grpc_out="+out, "--go-grpc_opt=paths=source_relative", "externalgrpc.proto")
	// protoc's own version is stamped in the header; it does not change
	// the code.
	version := regexp.MustCompile(`(?m)^//\s+protoc\s+v.*$`)
	for _, f := range []string{"externalgrpc.pb.go", "externalgrpc_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(version.ReplaceAll(got, nil), version.ReplaceAll(want, nil)) {
			t.Errorf("%s is stale: run make protos", f)
		}
	}
}
