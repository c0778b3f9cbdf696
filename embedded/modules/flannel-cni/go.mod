// Wrapper module for the flannel CNI plugin (binary `flannel`, which flannel's
// DaemonSet copies to the host's /opt/cni/bin). Its home, github.com/flannel-io/cni-plugin,
// is refused by the Go module proxy (403 for @v/list and for v1.9.1-flannel3,
// -flannel2, -flannel1, v1.9.0-flannel1, v1.8.0-flannel1, v1.7.1-flannel2, -flannel1,
// v1.6.2-flannel1). Before it moved there it was plugins/meta/flannel of
// containernetworking/plugins; v0.9.1 is the newest version of that module the proxy
// serves that still has it (v1.0.1 and later do not). It speaks CNI 0.1.0-0.4.0
// (flannel's conflist names cniVersion 0.3.1) and delegates to the host's bridge and
// host-local plugins, as the newer one does. A separate module because flannel v0.28.10
// requires containernetworking/plugins v1.9.1.
module provisioner.dev/embedded/flannel-cni

go 1.26.0

tool github.com/containernetworking/plugins/plugins/meta/flannel

require (
	github.com/Microsoft/go-winio v0.4.11 // indirect
	github.com/Microsoft/hcsshim v0.8.6 // indirect
	github.com/buger/jsonparser v0.0.0-20180808090653-f4dd9f5a6b44 // indirect
	github.com/containernetworking/cni v0.8.1 // indirect
	github.com/containernetworking/plugins v0.9.1 // indirect
	github.com/sirupsen/logrus v1.0.6 // indirect
	golang.org/x/crypto v0.0.0-20200622213623-75b288015ac9 // indirect
	golang.org/x/sys v0.0.0-20201117170446-d9b008d0a637 // indirect
)
