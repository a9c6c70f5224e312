"""Connection options of harvester.upgrade modules: kubernetes.core's auth options."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
notes:
  - Connection settings behave exactly as in kubernetes.core, including the
    C(K8S_AUTH_KUBECONFIG), C(K8S_AUTH_CONTEXT), C(K8S_AUTH_HOST), C(K8S_AUTH_API_KEY),
    C(K8S_AUTH_SSL_CA_CERT), C(K8S_AUTH_VERIFY_SSL) environment variables and
    C(KUBECONFIG).
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""
