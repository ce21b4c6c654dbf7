package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// KubeletPaths are the folders a kubelet and its DRA plugins share.
type KubeletPaths struct {
	// RegistrarDir is the kubelet's plugin registration folder,
	// <kubelet root>/plugins_registry; the kubelet finds the driver there.
	RegistrarDir string
	// PluginDir holds the driver's DRA socket the kubelet dials,
	// <kubelet root>/plugins/<driver name> by convention.
	PluginDir string
}

// PathsUnder returns the conventional paths for a kubelet root directory
// (/var/lib/kubelet on most nodes).
func PathsUnder(kubeletRoot, driverName string) KubeletPaths {
	return KubeletPaths{
		RegistrarDir: filepath.Join(kubeletRoot, "plugins_registry"),
		PluginDir:    filepath.Join(kubeletRoot, "plugins", driverName),
	}
}

// Running is a started driver.
type Running struct {
	helper *kubeletplugin.Helper
	cancel context.CancelCauseFunc
	done   <-chan struct{} // closed when the driver's context ends
	cause  func() error    // why it ended
}

// Start registers the driver with the kubelet through paths and starts
// publishing the inventory as the node's ResourceSlices. The client needs
// the RBAC in kubelet/deploy (ResourceSlices; nodes and claims read).
func Start(ctx context.Context, d *Driver, client kubernetes.Interface, paths KubeletPaths) (*Running, error) {
	for _, dir := range []string{paths.RegistrarDir, paths.PluginDir} {
		// The kubelet creates its registry folder when it starts; a driver
		// that comes up first creates it rather than failing.
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, err
		}
	}
	resources, err := d.cfg.Inventory.Resources(d.cfg.NodeName)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	d.fatal = func(err error) { cancel(err) }
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(d.cfg.DriverName),
		kubeletplugin.NodeName(d.cfg.NodeName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.RegistrarDirectoryPath(paths.RegistrarDir),
		kubeletplugin.PluginDataDirectoryPath(paths.PluginDir),
	)
	if err != nil {
		cancel(err)
		return nil, fmt.Errorf("start kubelet plugin: %w", err)
	}
	if err := helper.PublishResources(ctx, resources); err != nil {
		helper.Stop()
		cancel(err)
		return nil, fmt.Errorf("publish ResourceSlices: %w", err)
	}
	logger := klog.FromContext(ctx)
	logger.Info("DRA driver started", "driver", d.cfg.DriverName, "node", d.cfg.NodeName,
		"registrar", paths.RegistrarDir, "cdiDir", d.cfg.CDIDir, "prepared", len(d.Prepared().Claims))
	go logRegistration(ctx, helper)
	return &Running{helper: helper, cancel: cancel, done: ctx.Done(), cause: func() error { return context.Cause(ctx) }}, nil
}

// logRegistration logs the kubelet's answer to the registration once it
// comes: the one sign in the driver's log that the kubelet will call it.
func logRegistration(ctx context.Context, helper *kubeletplugin.Helper) {
	logger := klog.FromContext(ctx)
	_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		st := helper.RegistrationStatus()
		switch {
		case st == nil:
			return false, nil
		case st.PluginRegistered:
			logger.Info(RegisteredMessage)
		default:
			logger.Error(nil, "Kubelet rejected the driver", "error", st.Error)
		}
		return true, nil
	})
}

// RegisteredMessage is logged once the kubelet has accepted the driver.
const RegisteredMessage = "Kubelet registered the driver"

// Wait blocks until the driver stops: its context ends or a fatal error
// occurs. It returns nil for a normal stop.
func (r *Running) Wait() error {
	<-r.done
	r.helper.Stop()
	if err := r.cause(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, errStopped) {
		return err
	}
	return nil
}

var errStopped = errors.New("driver stopped")

// Stop unregisters the driver and stops publishing. The ResourceSlices
// stay; the kubelet removes them if the driver does not come back.
func (r *Running) Stop() {
	r.cancel(errStopped)
	r.helper.Stop()
}
