package classes

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const gpu v1.ResourceName = "example.com/gpu"

var (
	t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Hour)
)

func class(name string, created time.Time, extended v1.ResourceName) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	if extended != "" {
		c.Spec.ExtendedResourceName = ptr.To(string(extended))
	}
	return c
}

// op changes the index the way an informer event would.
type op func(x *Index)

func set(name string, created time.Time, extended v1.ResourceName) op {
	return func(x *Index) { x.Set(class(name, created, extended)) }
}

func del(name string) op { return func(x *Index) { x.Delete(name) } }

// clearField is an update of the class with spec.extendedResourceName removed.
func clearField(name string) op {
	return func(x *Index) {
		c, err := x.Get(name)
		if err != nil {
			panic(err)
		}
		c = c.DeepCopy()
		c.Spec.ExtendedResourceName = nil
		x.Set(c)
	}
}

// mutateInPlace clears the field on the stored object itself and sets it
// again, as a caller that edits its own objects would.
func mutateInPlace(name string) op {
	return func(x *Index) {
		c, _ := x.Get(name)
		c.Spec.ExtendedResourceName = nil
		x.Set(c)
	}
}

func TestResolver(t *testing.T) {
	tests := []struct {
		name string
		ops  []op
		// want maps resource names to the class name that must back them
		// ("" for none).
		want map[v1.ResourceName]string
		// wantNames lists, per class, the names it answers to.
		wantNames map[string][]v1.ResourceName
	}{
		{
			name: "one class: explicit and implicit name",
			ops:  []op{set("gpu", t0, gpu)},
			want: map[v1.ResourceName]string{gpu: "gpu", ImplicitName("gpu"): "gpu", "example.com/other": "", ImplicitName("nope"): ""},
			wantNames: map[string][]v1.ResourceName{
				"gpu":  {gpu, ImplicitName("gpu")},
				"nope": nil,
			},
		},
		{
			name: "newest creationTimestamp wins, older added last",
			ops:  []op{set("new", t1, gpu), set("old", t0, gpu)},
			want: map[v1.ResourceName]string{gpu: "new", ImplicitName("old"): "old", ImplicitName("new"): "new"},
			wantNames: map[string][]v1.ResourceName{
				"old": {ImplicitName("old")},
				"new": {gpu, ImplicitName("new")},
			},
		},
		{
			name: "newest creationTimestamp wins, older added first",
			ops:  []op{set("old", t0, gpu), set("new", t1, gpu)},
			want: map[v1.ResourceName]string{gpu: "new", ImplicitName("old"): "old", ImplicitName("new"): "new"},
		},
		{
			name: "newest wins even when its name sorts last",
			ops:  []op{set("zzz", t1, gpu), set("aaa", t0, gpu)},
			want: map[v1.ResourceName]string{gpu: "zzz", ImplicitName("aaa"): "aaa"},
		},
		{
			name: "tie: lexicographically first name, added last",
			ops:  []op{set("b", t0, gpu), set("a", t0, gpu)},
			want: map[v1.ResourceName]string{gpu: "a", ImplicitName("b"): "b"},
			wantNames: map[string][]v1.ResourceName{
				"a": {gpu, ImplicitName("a")},
				"b": {ImplicitName("b")},
			},
		},
		{
			name: "tie: lexicographically first name, added first",
			ops:  []op{set("a", t0, gpu), set("b", t0, gpu)},
			want: map[v1.ResourceName]string{gpu: "a"},
		},
		{
			name: "deleting the winner leaves the other",
			ops:  []op{set("old", t0, gpu), set("new", t1, gpu), del("new")},
			want: map[v1.ResourceName]string{gpu: "old", ImplicitName("old"): "old", ImplicitName("new"): ""},
			wantNames: map[string][]v1.ResourceName{
				"old": {gpu, ImplicitName("old")},
				"new": nil,
			},
		},
		{
			name: "deleting the loser keeps the winner",
			ops:  []op{set("old", t0, gpu), set("new", t1, gpu), del("old")},
			want: map[v1.ResourceName]string{gpu: "new", ImplicitName("old"): "", ImplicitName("new"): "new"},
		},
		{
			name: "clearing the winner's field hands the name over; it keeps its implicit name",
			ops:  []op{set("old", t0, gpu), set("new", t1, gpu), clearField("new")},
			want: map[v1.ResourceName]string{gpu: "old", ImplicitName("old"): "old", ImplicitName("new"): "new"},
			wantNames: map[string][]v1.ResourceName{
				"old": {gpu, ImplicitName("old")},
				"new": {ImplicitName("new")},
			},
		},
		{
			name: "clearing the loser's field keeps the winner",
			ops:  []op{set("old", t0, gpu), set("new", t1, gpu), clearField("old")},
			want: map[v1.ResourceName]string{gpu: "new", ImplicitName("old"): "old", ImplicitName("new"): "new"},
		},
		{
			name: "clearing the field on the stored object in place",
			ops:  []op{set("old", t0, gpu), set("new", t1, gpu), mutateInPlace("new")},
			want: map[v1.ResourceName]string{gpu: "old", ImplicitName("new"): "new"},
		},
		{
			name: "re-adding the deleted winner restores it",
			ops:  []op{set("old", t0, gpu), set("new", t1, gpu), del("new"), set("new", t1, gpu)},
			want: map[v1.ResourceName]string{gpu: "new", ImplicitName("old"): "old"},
		},
		{
			name: "setting the field again restores the winner",
			ops:  []op{set("old", t0, gpu), set("new", t1, gpu), clearField("new"), set("new", t1, gpu)},
			want: map[v1.ResourceName]string{gpu: "new"},
		},
		{
			name: "re-adding the deleted loser does not take the name",
			ops:  []op{set("old", t0, gpu), set("new", t1, gpu), del("old"), set("old", t0, gpu)},
			want: map[v1.ResourceName]string{gpu: "new", ImplicitName("old"): "old"},
		},
		{
			name: "moving the winner to another name",
			ops:  []op{set("old", t0, gpu), set("new", t1, gpu), set("new", t1, "example.com/tpu")},
			want: map[v1.ResourceName]string{gpu: "old", "example.com/tpu": "new"},
		},
		{
			name: "deleting both drops the name",
			ops:  []op{set("old", t0, gpu), set("new", t1, gpu), del("old"), del("new")},
			want: map[v1.ResourceName]string{gpu: "", ImplicitName("old"): "", ImplicitName("new"): ""},
		},
		{
			name: "three candidates, winner deleted: next newest",
			ops:  []op{set("a", t0, gpu), set("c", t1, gpu), set("b", t1.Add(time.Hour), gpu), del("b")},
			want: map[v1.ResourceName]string{gpu: "c"},
		},
		{
			name: "deleting an unknown class changes nothing",
			ops:  []op{set("gpu", t0, gpu), del("unknown")},
			want: map[v1.ResourceName]string{gpu: "gpu"},
		},
		{
			name: "bare prefix is no class",
			ops:  []op{set("gpu", t0, gpu)},
			want: map[v1.ResourceName]string{ImplicitPrefix: ""},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := NewIndex()
			for _, o := range tc.ops {
				o(x)
			}
			view := x.Mapping()
			for rName, want := range tc.want {
				got := ""
				if c := x.GetDeviceClass(rName); c != nil {
					got = c.Name
				}
				if got != want {
					t.Errorf("GetDeviceClass(%s) = %q, want %q", rName, got, want)
				}
				got = ""
				if c := view.GetDeviceClass(rName); c != nil {
					got = c.Name
				}
				if got != want {
					t.Errorf("Mapping().GetDeviceClass(%s) = %q, want %q", rName, got, want)
				}
			}
			for className, want := range tc.wantNames {
				if got := x.ResourceNames(className); !slices.Equal(got, want) {
					t.Errorf("ResourceNames(%s) = %v, want %v", className, got, want)
				}
			}
		})
	}
}

func TestResolverListerAndDescribe(t *testing.T) {
	x := NewIndex()
	x.Set(class("b", t0, gpu))
	x.Set(class("a", t1, ""))
	x.Set(class("c", t0, ""))

	list, err := x.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list {
		names = append(names, c.Name)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(names, want) {
		t.Errorf("List() = %v, want %v", names, want)
	}
	x.Delete("a")
	if list, _ := x.List(); len(list) != 2 {
		t.Errorf("after Delete: List() has %d classes, want 2", len(list))
	}
	if _, err := x.Get("a"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(a) after delete: err = %v, want NotFound", err)
	}
	if c, err := x.Get("b"); err != nil || c.Name != "b" {
		t.Errorf("Get(b) = %v, %v", c, err)
	}
	for rName, want := range map[v1.ResourceName]string{
		gpu:                 "b",
		ImplicitName("c"):   "c",
		"example.com/other": "",
	} {
		got := ""
		if c := x.GetDeviceClass(rName); c != nil {
			got = c.Name
		}
		if got != want {
			t.Errorf("GetDeviceClass(%s) = %q, want %q", rName, got, want)
		}
	}
}

// A Mapping is a snapshot: changes to the index after it was taken do not
// reach it, so a scheduling cycle holding it sees one answer throughout.
func TestMappingIsASnapshot(t *testing.T) {
	x := NewIndex()
	x.Set(class("old", t0, gpu))
	before := x.Mapping()
	x.Set(class("new", t1, gpu))
	x.Delete("old")
	after := x.Mapping()
	for _, tc := range []struct {
		view *Mapping
		name v1.ResourceName
		want string
	}{
		{before, gpu, "old"},
		{before, ImplicitName("old"), "old"},
		{before, ImplicitName("new"), ""},
		{after, gpu, "new"},
		{after, ImplicitName("old"), ""},
		{after, ImplicitName("new"), "new"},
		{nil, gpu, ""},
	} {
		got := ""
		if c := tc.view.GetDeviceClass(tc.name); c != nil {
			got = c.Name
		}
		if got != tc.want {
			t.Errorf("view %p: GetDeviceClass(%s) = %q, want %q", tc.view, tc.name, got, tc.want)
		}
	}
}
