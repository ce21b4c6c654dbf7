package kwok

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// The provider's configuration, as CA's kwok provider reads it: the
// ConfigMap DefaultConfigName (or $KWOK_PROVIDER_CONFIGMAP) in the
// autoscaler's namespace ($POD_NAMESPACE), key ConfigKey.
const (
	DefaultConfigName = "kwok-provider-config"
	ConfigMapEnv      = "KWOK_PROVIDER_CONFIGMAP"
	NamespaceEnv      = "POD_NAMESPACE"
	ConfigKey         = "config"

	// DefaultTemplatesName holds the template nodes with
	// readNodesFrom: configmap, key TemplatesKey: a v1 List of Nodes or
	// Node documents separated by ---.
	DefaultTemplatesName = "kwok-provider-templates"
	TemplatesKey         = "templates"

	// ReadNodesFromConfigMap and ReadNodesFromCluster are readNodesFrom's
	// values: template nodes from the templates ConfigMap, or from the
	// cluster's own nodes.
	ReadNodesFromConfigMap = "configmap"
	ReadNodesFromCluster   = "cluster"
)

// Config is kwok-provider-config's "config" document (CA's
// KwokProviderConfig); fields CA reads and draxr has no use for are
// accepted and checked the same way.
type Config struct {
	APIVersion    string            `json:"apiVersion,omitempty"`
	ReadNodesFrom string            `json:"readNodesFrom"`
	Nodegroups    *NodegroupsConfig `json:"nodegroups,omitempty"`
	Nodes         *NodesConfig      `json:"nodes,omitempty"`
	ConfigMap     *ConfigMapConfig  `json:"configmap,omitempty"`
	Kwok          *struct{}         `json:"kwok,omitempty"`
}

// NodegroupsConfig says which label or annotation of a template node
// names its group (exactly one of the two).
type NodegroupsConfig struct {
	FromNodeLabelKey      string `json:"fromNodeLabelKey,omitempty"`
	FromNodeAnnotationKey string `json:"fromNodeAnnotationKey,omitempty"`
}

// NodesConfig: SkipTaint leaves out the kwok-provider=true:NoSchedule
// taint new nodes carry by default (so that real workloads do not land
// on fake nodes by accident). GPUConfig is CA's GPU label setting.
type NodesConfig struct {
	SkipTaint bool       `json:"skipTaint,omitempty"`
	GPUConfig *GPUConfig `json:"gpuConfig,omitempty"`
}

// GPUConfig is CA's GPU label and types: checked, and not used by draxr,
// which counts GPUs as DRA devices or extended resources.
type GPUConfig struct {
	GPULabelKey       string              `json:"gpuLabelKey,omitempty"`
	AvailableGPUTypes map[string]struct{} `json:"availableGPUTypes,omitempty"`
}

// ConfigMapConfig names the templates ConfigMap (readNodesFrom:
// configmap). CA reads the templates from key TemplatesKey whatever Key
// says; so does draxr, and Key is accepted for CA's samples.
type ConfigMapConfig struct {
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
}

// groupBy says how a node's group is named: by label or by annotation.
type groupBy struct {
	label bool
	key   string
}

// ParseConfig reads and checks the config document; what names the
// source (ConfigMap namespace/name, key) is in every error.
func ParseConfig(source, data string) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict([]byte(data), &c); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	bad := func(format string, args ...any) (*Config, error) {
		return nil, fmt.Errorf("%s: %s", source, fmt.Sprintf(format, args...))
	}
	switch c.ReadNodesFrom {
	case ReadNodesFromConfigMap:
		if c.ConfigMap == nil || strings.TrimSpace(c.ConfigMap.Name) == "" {
			return bad("readNodesFrom: %s needs configmap.name (the templates ConfigMap, e.g. %s)", ReadNodesFromConfigMap, DefaultTemplatesName)
		}
	case ReadNodesFromCluster:
	default:
		return bad("readNodesFrom: want %q or %q, got %q", ReadNodesFromConfigMap, ReadNodesFromCluster, c.ReadNodesFrom)
	}
	if c.Nodegroups == nil {
		return bad("nodegroups is required (fromNodeLabelKey or fromNodeAnnotationKey)")
	}
	label, annotation := strings.TrimSpace(c.Nodegroups.FromNodeLabelKey), strings.TrimSpace(c.Nodegroups.FromNodeAnnotationKey)
	switch {
	case label == "" && annotation == "":
		return bad("nodegroups: set fromNodeLabelKey or fromNodeAnnotationKey")
	case label != "" && annotation != "":
		return bad("nodegroups: set fromNodeLabelKey or fromNodeAnnotationKey, not both")
	}
	if c.Nodes == nil {
		c.Nodes = &NodesConfig{}
	}
	if g := c.Nodes.GPUConfig; g != nil && (g.GPULabelKey == "" || len(g.AvailableGPUTypes) == 0) {
		return bad("nodes.gpuConfig: set both gpuLabelKey and availableGPUTypes")
	}
	return &c, nil
}

func (c *Config) groupBy() groupBy {
	if k := strings.TrimSpace(c.Nodegroups.FromNodeLabelKey); k != "" {
		return groupBy{label: true, key: k}
	}
	return groupBy{key: strings.TrimSpace(c.Nodegroups.FromNodeAnnotationKey)}
}

func (g groupBy) String() string {
	if g.label {
		return "label " + g.key
	}
	return "annotation " + g.key
}
