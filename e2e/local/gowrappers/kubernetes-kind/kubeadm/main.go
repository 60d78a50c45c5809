// Command kubeadm runs the upstream kubeadm of the pinned Kubernetes release (the kind node image,
// e2e/kind/build-node-image.sh: kind bootstraps its node with it).
package main

import (
	"k8s.io/kubernetes/cmd/kubeadm/app"
	kubeadmutil "k8s.io/kubernetes/cmd/kubeadm/app/util"
)

func main() {
	kubeadmutil.CheckErr(app.Run())
}
