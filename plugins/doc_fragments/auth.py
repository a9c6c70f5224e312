"""Notes and requirements of the collection's connection options.

The options themselves are kubernetes.core's: every module lists
``kubernetes.core.k8s_auth_options`` next to this fragment. ansible-core does not follow an
``extends_documentation_fragment`` inside a fragment, so this one cannot bring them in itself
(tests/test_ecosystem.py compares each module's ``ansible-doc`` options with its
argument_spec).
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
notes:
  - Connection settings behave exactly as in kubernetes.core, including the
    C(K8S_AUTH_KUBECONFIG), C(K8S_AUTH_CONTEXT), C(K8S_AUTH_HOST), C(K8S_AUTH_API_KEY),
    C(K8S_AUTH_SSL_CA_CERT), C(K8S_AUTH_VERIFY_SSL) environment variables and
    C(KUBECONFIG).
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""
