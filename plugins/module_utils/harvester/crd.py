"""The UpgradePlan CustomResourceDefinition, shipped inline (AnsiballZ only carries Python
files), installed by ``upgrade_plan`` when the cluster does not serve UpgradePlans.

Cluster-scoped, status subresource, short names ``up``/``ups``, printer columns VERSION,
CURRENTPHASE, AVAILABLE, PROGRESSING, DEGRADED. ``kubectl apply`` it by hand with
``python -c 'from ...crd import CRD_YAML; print(CRD_YAML)'`` if needed.
"""

from __future__ import annotations

from typing import Any

CRD_YAML = """\
# UpgradePlan CRD (management.harvesterhci.io/v1beta1), installed by
# harvester.upgrade.upgrade_plan when the cluster does not serve it yet.
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: upgradeplans.management.harvesterhci.io
  labels:
    app.kubernetes.io/managed-by: harvester.upgrade
spec:
  group: management.harvesterhci.io
  scope: Cluster
  names:
    kind: UpgradePlan
    listKind: UpgradePlanList
    plural: upgradeplans
    singular: upgradeplan
    shortNames: [up, ups]
  versions:
    - name: v1beta1
      served: true
      storage: true
      subresources:
        status: {}
      additionalPrinterColumns:
        - name: VERSION
          type: string
          jsonPath: .spec.version
        - name: CURRENTPHASE
          type: string
          jsonPath: .status.currentPhase
        - name: AVAILABLE
          type: string
          jsonPath: .status.conditions[?(@.type=="Available")].status
        - name: PROGRESSING
          type: string
          jsonPath: .status.conditions[?(@.type=="Progressing")].status
        - name: DEGRADED
          type: string
          jsonPath: .status.conditions[?(@.type=="Degraded")].status
        - name: AGE
          type: date
          jsonPath: .metadata.creationTimestamp
      schema:
        openAPIV3Schema:
          type: object
          description: UpgradePlan drives one upgrade of a Harvester cluster.
          properties:
            apiVersion: {type: string}
            kind: {type: string}
            metadata: {type: object}
            spec:
              type: object
              x-kubernetes-validations:
                - rule: has(self.version) || has(self.image)
                  message: at least one of spec.version or spec.image must be set
                - rule: >-
                    has(self.upgrade) == has(oldSelf.upgrade) &&
                    (!has(self.upgrade) || self.upgrade == oldSelf.upgrade)
                  message: spec.upgrade is immutable after creation
                - rule: >-
                    has(self.image) == has(oldSelf.image) &&
                    (!has(self.image) || self.image == oldSelf.image)
                  message: spec.image is immutable after creation
                - rule: >-
                    has(self.version) == has(oldSelf.version) &&
                    (!has(self.version) || self.version == oldSelf.version)
                  message: spec.version is immutable after creation
              properties:
                version: {type: string, minLength: 1}
                image: {type: string}
                upgrade: {type: string}
                force: {type: boolean}
                restoreVM: {type: boolean}
                imagePreloadOption:
                  type: object
                  properties:
                    concurrency: {type: integer}
                nodeUpgradeOption:
                  type: object
                  properties:
                    pauseNodes:
                      type: array
                      x-kubernetes-list-type: set
                      items: {type: string, minLength: 1}
            status:
              type: object
              properties:
                conditions:
                  type: array
                  x-kubernetes-list-map-keys: [type]
                  x-kubernetes-list-type: map
                  items:
                    type: object
                    required: [lastTransitionTime, message, reason, status, type]
                    properties:
                      lastTransitionTime: {type: string, format: date-time}
                      message: {type: string, maxLength: 32768}
                      observedGeneration: {type: integer, format: int64, minimum: 0}
                      reason: {type: string, maxLength: 1024}
                      status: {type: string, enum: ["True", "False", "Unknown"]}
                      type: {type: string, maxLength: 316}
                currentPhase: {type: string}
                phaseTransitionTimestamps:
                  type: array
                  items:
                    type: object
                    properties:
                      phase: {type: string}
                      phaseTransitionTimestamp: {type: string, format: date-time}
                nodeUpgradeStatuses:
                  type: object
                  x-kubernetes-map-type: atomic
                  additionalProperties:
                    type: object
                    properties:
                      state: {type: string}
                      reason: {type: string}
                      message: {type: string}
                isoImageID: {type: string}
                previousVersion: {type: string}
                provisionGeneration: {type: integer, format: int64}
                singleNode: {type: string}
                releaseMetadata:
                  type: object
                  properties:
                    harvester: {type: string}
                    harvesterChart: {type: string}
                    os: {type: string}
                    kubernetes: {type: string}
                    rancher: {type: string}
                    monitoringChart: {type: string}
                    minUpgradableVersion: {type: string}
                version:
                  type: object
                  properties:
                    isoURL: {type: string}
                    isoChecksum: {type: string}
                    releaseDate: {type: string}
                    tags:
                      type: array
                      items: {type: string}
"""


def definition() -> dict[str, Any]:
    """The CRD as a dict."""
    import yaml

    # libyaml's safe loader when PyYAML has it (the same dict; the first run's UpgradePlan
    # creation waits for it)
    return dict(yaml.load(CRD_YAML,
                          Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
