package inventory

import "flag"

// Flags pick a driver's inventory on the command line: a file, or count
// uniform devices. The reference driver and the test node share them.
type Flags struct {
	File   string
	Count  int
	Prefix string
	Model  string
}

// AddFlags registers --inventory, --devices, --device-prefix and
// --device-model; scope starts each usage text ("in-process driver: ").
func (f *Flags) AddFlags(fs *flag.FlagSet, scope string) {
	fs.StringVar(&f.File, "inventory", "", scope+"YAML file listing the devices (see kubelet/inventory); overrides --devices")
	fs.IntVar(&f.Count, "devices", 8, scope+"without --inventory: number of devices <device-prefix>-0 ..")
	fs.StringVar(&f.Prefix, "device-prefix", "gpu", scope+"without --inventory: device name prefix")
	fs.StringVar(&f.Model, "device-model", "example", scope+"without --inventory: value of the devices' model attribute")
}

// Inventory is the file's inventory when --inventory is given, else the
// uniform one.
func (f Flags) Inventory() (Inventory, error) {
	if f.File != "" {
		return Load(f.File)
	}
	return Uniform(f.Prefix, f.Count, f.Model), nil
}
