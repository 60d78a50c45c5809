"""The node agent of the local e2e cluster (test infrastructure only).

It plays the kubelet for one Node: registers it, keeps its Lease and Ready condition fresh,
and runs the containers of the pods bound to it as local processes, each pod with its own
127.x.y.z address. See e2e/README.md for what it supports and the image-name rule.
"""
