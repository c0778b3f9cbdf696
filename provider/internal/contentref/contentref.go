// Package contentref reads what a NodePlan's contentRef and a probe's CA reference name:
// one key of a Secret or ConfigMap in the plan's namespace.
package contentref

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// Read returns one key of a Secret (secret true) or ConfigMap (binaryData included).
// found is false when the object or the key does not exist.
func Read(ctx context.Context, c client.Reader, namespace string, ref *agentv1.KeyReference, secret bool) (content []byte, found bool, err error) {
	key := types.NamespacedName{Namespace: namespace, Name: ref.Name}
	if secret {
		var s corev1.Secret
		if err := c.Get(ctx, key, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, false, nil
			}
			return nil, false, err
		}
		v, ok := s.Data[ref.Key]
		return v, ok, nil
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, key, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	if v, ok := cm.Data[ref.Key]; ok {
		return []byte(v), true, nil
	}
	v, ok := cm.BinaryData[ref.Key]
	return v, ok, nil
}
