"""Names shared by every part of the collection: API groups/kinds, namespaces, labels,
annotations and Event vocabulary of Harvester Upgrade V2 (docs/protocol.md, reference §A, §F).

Pure data; imported by every other ``module_utils/harvester`` module and by the modules.
"""

from __future__ import annotations

# --- UpgradePlan --------------------------------------------------------------------------
PLAN_GROUP = "management.harvesterhci.io"
PLAN_API_VERSION = "management.harvesterhci.io/v1beta1"
PLAN_KIND = "UpgradePlan"
PLAN_PLURAL = "upgradeplans"
PLAN_CRD_NAME = "upgradeplans.management.harvesterhci.io"
PLAN_GENERATE_NAME = "hvst-upgrade-"
# Kept on a plan until its cleanup ran (Finalize or an abort); see plan_cleanup.
PLAN_FINALIZER = "harvester-upgrade.harvesterhci.io/cleanup"

# --- other kinds (api_version, kind) -------------------------------------------------------
VERSION = ("harvesterhci.io/v1beta1", "Version")
VERSION_MGMT = ("management.harvesterhci.io/v1beta1", "Version")
SETTING = ("harvesterhci.io/v1beta1", "Setting")
VM_IMAGE = ("harvesterhci.io/v1beta1", "VirtualMachineImage")
VM_BACKUP = ("harvesterhci.io/v1beta1", "VirtualMachineBackup")
VM_BACKUP_SCHEDULE = ("harvesterhci.io/v1beta1", "ScheduleVMBackup")
ADDON = ("harvesterhci.io/v1beta1", "Addon")
NODE = ("v1", "Node")
POD = ("v1", "Pod")
SECRET = ("v1", "Secret")
PDB = ("policy/v1", "PodDisruptionBudget")
SERVICE = ("v1", "Service")
SERVICE_ACCOUNT = ("v1", "ServiceAccount")
ENDPOINTS = ("v1", "Endpoints")
EVENT = ("v1", "Event")
DEPLOYMENT = ("apps/v1", "Deployment")
JOB = ("batch/v1", "Job")
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
ENDPOINT_SLICE = ("discovery.k8s.io/v1", "EndpointSlice")
SUC_PLAN = ("upgrade.cattle.io/v1", "Plan")
RANCHER_CLUSTER = ("provisioning.cattle.io/v1", "Cluster")
CAPI_MACHINE = ("cluster.x-k8s.io/v1beta1", "Machine")
MANAGED_CHART = ("management.cattle.io/v3", "ManagedChart")
FLEET_BUNDLE = ("fleet.cattle.io/v1alpha1", "Bundle")
LH_VOLUME = ("longhorn.io/v1beta2", "Volume")
LH_SETTING = ("longhorn.io/v1beta2", "Setting")
LH_REPLICA = ("longhorn.io/v1beta2", "Replica")
LH_ENGINE = ("longhorn.io/v1beta2", "Engine")
VM = ("kubevirt.io/v1", "VirtualMachine")
VMI = ("kubevirt.io/v1", "VirtualMachineInstance")
VMIM = ("kubevirt.io/v1", "VirtualMachineInstanceMigration")
KUBEVIRT = ("kubevirt.io/v1", "KubeVirt")
CONFIGMAP = ("v1", "ConfigMap")

# --- namespaces and well-known names --------------------------------------------------------
UPGRADE_NS = "harvester-system"
SUC_NS = "cattle-system"
FLEET_NS = "fleet-local"
LONGHORN_NS = "longhorn-system"
EVENT_NS = "default"
RANCHER_CLUSTER_NAME = "local"
# Namespaces of the platform itself (Kubernetes, Rancher, Fleet, Longhorn, Harvester, KubeVirt,
# CDI): their pods stay Rancher's drain's business (node_pod_eviction), e.g. Longhorn's
# instance-manager PDBs, which the pre-drain script waits on first. Plus every namespace with
# one of SYSTEM_NAMESPACE_PREFIXES (Rancher's cattle-*-system, Fleet's fleet-*).
SYSTEM_NAMESPACES = frozenset({
    "kube-system", "kube-public", "kube-node-lease", UPGRADE_NS, "harvester-public",
    LONGHORN_NS, "kubevirt", "cdi", "local"})
SYSTEM_NAMESPACE_PREFIXES = ("cattle-", "fleet-")
SERVER_VERSION_SETTING = "server-version"

TOOLKIT_IMAGE_REPO = "rancher/harvester-upgrade-toolkit"
REPO_IMAGE = "rancher/mirrored-library-nginx:1.24.0-alpine"
REPO_CONTAINER = "nginx-iso-server"
ISO_STORAGE_CLASS = "longhorn-static"
RELEASE_FILE = "harvester-release.yaml"
ISO_HTTP_PREFIX = "harvester-iso"

# --- labels ---------------------------------------------------------------------------------
LABEL_PLAN = "management.harvesterhci.io/upgrade-plan"
LABEL_COMPONENT = "management.harvesterhci.io/upgrade-component"
LABEL_NODE = "management.harvesterhci.io/node"
LABEL_JOB_TYPE = "management.harvesterhci.io/job-type"
LABEL_MANAGED = "harvesterhci.io/managed"
LABEL_WITNESS = "node-role.harvesterhci.io/witness"
LABEL_SUC_NODE = "upgrade.cattle.io/node"
LABEL_SUC_PLAN = "upgrade.cattle.io/plan"

COMPONENT_ISO = "iso"
COMPONENT_REPO = "repo"
COMPONENT_IMAGE_PRELOAD = "image-preload"
COMPONENT_CLUSTER_UPGRADE = "cluster-upgrade"
COMPONENT_NODE_UPGRADE = "node-upgrade"
COMPONENT_IMAGE_CLEANUP = "image-cleanup"

# --- annotations ----------------------------------------------------------------------------
ANN_OS_UPGRADE_IMAGE = "harvesterhci.io/os-upgrade-image"
ANN_MACHINE = "cluster.x-k8s.io/machine"
ANN_INTERNAL_IP = "rke2.io/internal-ip"
ANN_PENDING_OS_IMAGE = "management.harvesterhci.io/pendingOSImage"
ANN_PRE_HOOK = "management.harvesterhci.io/pre-hook"
ANN_POST_HOOK = "management.harvesterhci.io/post-hook"
ANN_TOOLKIT_IMAGE = "management.harvesterhci.io/upgrade-toolkit-image"
ANN_REPLENISH_SAVED = "management.harvesterhci.io/replica-replenishment-wait-interval"
ANN_DESCHEDULER_WAS_ENABLED = "management.harvesterhci.io/descheduler-was-enabled"
# Coexistence (docs/operator-guide.md "Other upgrade mechanisms"): Harvester's built-in (V1)
# upgrade and the Upgrade Manager add-on (upgrade-toolkit), which reconciles UpgradePlans too
V1_UPGRADE = ("harvesterhci.io/v1beta1", "Upgrade")
LABEL_V1_UPGRADE_STATE = "harvesterhci.io/upgradeState"
V1_UPGRADE_TERMINAL = ("Succeeded", "Failed")
UPGRADE_MANAGER_ADDON = "harvester-upgrade-manager"
LABEL_APP_NAME = "app.kubernetes.io/name"
LABEL_SERVICE_NAME = "kubernetes.io/service-name"
ANN_SNAPSHOT_CLEANUP_SAVED = "management.harvesterhci.io/auto-cleanup-system-generated-snapshot"

# NodeUpgrade's PreRun (Harvester's upgrade controller, pkg/controller/master/upgrade/
# upgrade_controller.go at v1.5.1/v1.6.0/v1.7.x; docs/node-upgrade.md "Cluster settings")
LH_REPLENISH_SETTING = "replica-replenishment-wait-interval"
LH_SNAPSHOT_CLEANUP_SETTING = "auto-cleanup-system-generated-snapshot"
EXTENDED_REPLENISH_WAIT_S = 1800
DESCHEDULER_ADDON = ("kube-system", "descheduler")
# the release that stopped disabling Longhorn's system-snapshot cleanup (harvester commit
# 875488960, "upgrade: do not disable the auto cleanup system snapshot")
SNAPSHOT_CLEANUP_KEPT_FROM = "v1.6.1"

# Skip/override annotations: (README spelling, legacy/code spelling); both are honoured.
ANN_SKIP_WEBHOOK = ("management.harvesterhci.io/skip-webhook", "harvesterhci.io/skipWebhook")
ANN_SKIP_SINGLE_REPLICA_DETACHED = (
    "management.harvesterhci.io/skip-single-replica-detached-vol",
    "harvesterhci.io/skipSingleReplicaDetachedVol",
)
ANN_SKIP_GC_THRESHOLD = (
    "management.harvesterhci.io/skip-garbage-collection-threshold-check",
    "harvesterhci.io/skipGarbageCollectionThresholdCheck",
)
ANN_MIN_CERT_DAYS = (
    "management.harvesterhci.io/min-certs-expiration-in-day",
    "harvesterhci.io/minCertsExpirationInDay",
)
ANN_SKIP_VERSION_CHECK = ("harvesterhci.io/skip-version-check",)
# The collection's own switches, recorded on the plan it creates so that every later run of
# every phase applies the same decision (docs/variables.md): each lifts one refusal only.
ANN_ALLOW_DOWNGRADE = ("harvester-upgrade.harvesterhci.io/allow-downgrade",)
ANN_ALLOW_VERSION_SKIP = ("harvester-upgrade.harvesterhci.io/allow-version-skip",)
ANN_ALLOW_UNVERIFIED_ISO = ("harvester-upgrade.harvesterhci.io/allow-unverified-iso",)
# The cluster a plan belongs to: the uid of its kube-system Namespace (made once, when the
# cluster is installed, and never reused), recorded when the plan is created and compared
# with the cluster each run talks to.
ANN_CLUSTER_UID = "harvester-upgrade.harvesterhci.io/cluster-uid"
CLUSTER_ID_NAMESPACE = "kube-system"

# --- Events ---------------------------------------------------------------------------------
EVENT_COMPONENT = "upgradeplan-controller"
REASON_PHASE_TRANSITION = "PhaseTransition"
REASON_PHASE_COMPLETED = "PhaseCompleted"
REASON_RECONCILE_ERROR = "ReconcileError"
REASON_CONCURRENT_BLOCKED = "ConcurrentUpgradeBlocked"
REASON_UPGRADE_SUCCEEDED = "UpgradeSucceeded"
REASON_UPGRADE_FAILED = "UpgradeFailed"
REASON_IMAGE_CLEANUP_SKIPPED = "ImageCleanupSkipped"

# --- misc -------------------------------------------------------------------------------------
NEW_IMAGES_BYTES = 13 * 1024**3          # projected size of the new release's images (§E.2)
DEFAULT_GC_HIGH_THRESHOLD = 85
DEFAULT_MIN_CERT_DAYS = 7
JOB_TTL_SECONDS = 604800
RETAINED_IMAGE_NAMES = ("harvester-upgrade", "longhorn-engine", "longhorn-instance-manager",
                        "mirrored-banzaicloud-fluentd", "mirrored-fluent-fluent-bit")
