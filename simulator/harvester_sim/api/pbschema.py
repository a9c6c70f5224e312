"""Protobuf schema of the built-in kinds the simulator decodes (GENERATED - do not edit).

Source: k8s.io/api v0.36.3, k8s.io/apimachinery v0.36.3 and
k8s.io/apiextensions-apiserver v0.36.3 (generated.proto field numbers and
types; types.go json tags), by simulator/scripts/gen_protobuf_schema.py.

MESSAGES: message -> {field number: (json name, flags, type)}. Message names drop the
``k8s.io.api.`` / ``k8s.io.apimachinery.pkg[.apis].`` /
``k8s.io.apiextensions_apiserver.pkg.apis.`` prefix. Flags: ``r`` repeated,
``m`` map (type is ``key,value``), ``i`` embedded inline in JSON, ``z`` omitted from
JSON when zero (``omitempty`` on a non-pointer). LISTS: messages that are a named Go
slice (``items`` only) and are a plain JSON array.

APIEXTENSIONS: the messages of k8s.io/apiextensions-apiserver, in the same form. They
are kept apart from MESSAGES because several of them (``JSON``, ``JSONSchemaPropsOr*``)
have their own ``MarshalJSON``: their JSON is not their fields, which only the protobuf
decoder knows; the readers of MESSAGES take every message for its Go fields.
"""

from __future__ import annotations

MESSAGES: dict[str, dict[int, tuple[str, str, str]]] = {
    'api.resource.Quantity': {
        1: ('string', 'z', 'string'),
    },
    'apps.v1.ControllerRevision': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('data', 'z', 'runtime.RawExtension'),
        3: ('revision', '', 'int64'),
    },
    'apps.v1.DaemonSet': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'apps.v1.DaemonSetSpec'),
        3: ('status', 'z', 'apps.v1.DaemonSetStatus'),
    },
    'apps.v1.DaemonSetCondition': {
        1: ('type', '', 'string'), 2: ('status', '', 'string'),
        3: ('lastTransitionTime', 'z', 'meta.v1.Time'), 4: ('reason', 'z', 'string'),
        5: ('message', 'z', 'string'),
    },
    'apps.v1.DaemonSetSpec': {
        1: ('selector', '', 'meta.v1.LabelSelector'),
        2: ('template', '', 'core.v1.PodTemplateSpec'),
        3: ('updateStrategy', 'z', 'apps.v1.DaemonSetUpdateStrategy'),
        4: ('minReadySeconds', 'z', 'int32'), 6: ('revisionHistoryLimit', '', 'int32'),
    },
    'apps.v1.DaemonSetStatus': {
        1: ('currentNumberScheduled', '', 'int32'), 2: ('numberMisscheduled', '', 'int32'),
        3: ('desiredNumberScheduled', '', 'int32'), 4: ('numberReady', '', 'int32'),
        5: ('observedGeneration', 'z', 'int64'), 6: ('updatedNumberScheduled', 'z', 'int32'),
        7: ('numberAvailable', 'z', 'int32'), 8: ('numberUnavailable', 'z', 'int32'),
        9: ('collisionCount', '', 'int32'), 10: ('conditions', 'r', 'apps.v1.DaemonSetCondition'),
    },
    'apps.v1.DaemonSetUpdateStrategy': {
        1: ('type', 'z', 'string'), 2: ('rollingUpdate', '', 'apps.v1.RollingUpdateDaemonSet'),
    },
    'apps.v1.Deployment': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'apps.v1.DeploymentSpec'),
        3: ('status', 'z', 'apps.v1.DeploymentStatus'),
    },
    'apps.v1.DeploymentCondition': {
        1: ('type', '', 'string'), 2: ('status', '', 'string'),
        6: ('lastUpdateTime', 'z', 'meta.v1.Time'), 7: ('lastTransitionTime', 'z', 'meta.v1.Time'),
        4: ('reason', 'z', 'string'), 5: ('message', 'z', 'string'),
    },
    'apps.v1.DeploymentSpec': {
        1: ('replicas', '', 'int32'), 2: ('selector', '', 'meta.v1.LabelSelector'),
        3: ('template', '', 'core.v1.PodTemplateSpec'),
        4: ('strategy', 'z', 'apps.v1.DeploymentStrategy'), 5: ('minReadySeconds', 'z', 'int32'),
        6: ('revisionHistoryLimit', '', 'int32'), 7: ('paused', 'z', 'bool'),
        9: ('progressDeadlineSeconds', '', 'int32'),
    },
    'apps.v1.DeploymentStatus': {
        1: ('observedGeneration', 'z', 'int64'), 2: ('replicas', 'z', 'int32'),
        3: ('updatedReplicas', 'z', 'int32'), 7: ('readyReplicas', 'z', 'int32'),
        4: ('availableReplicas', 'z', 'int32'), 5: ('unavailableReplicas', 'z', 'int32'),
        9: ('terminatingReplicas', '', 'int32'),
        6: ('conditions', 'r', 'apps.v1.DeploymentCondition'), 8: ('collisionCount', '', 'int32'),
    },
    'apps.v1.DeploymentStrategy': {
        1: ('type', 'z', 'string'), 2: ('rollingUpdate', '', 'apps.v1.RollingUpdateDeployment'),
    },
    'apps.v1.ReplicaSet': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'apps.v1.ReplicaSetSpec'),
        3: ('status', 'z', 'apps.v1.ReplicaSetStatus'),
    },
    'apps.v1.ReplicaSetCondition': {
        1: ('type', '', 'string'), 2: ('status', '', 'string'),
        3: ('lastTransitionTime', 'z', 'meta.v1.Time'), 4: ('reason', 'z', 'string'),
        5: ('message', 'z', 'string'),
    },
    'apps.v1.ReplicaSetSpec': {
        1: ('replicas', '', 'int32'), 4: ('minReadySeconds', 'z', 'int32'),
        2: ('selector', '', 'meta.v1.LabelSelector'),
        3: ('template', 'z', 'core.v1.PodTemplateSpec'),
    },
    'apps.v1.ReplicaSetStatus': {
        1: ('replicas', '', 'int32'), 2: ('fullyLabeledReplicas', 'z', 'int32'),
        4: ('readyReplicas', 'z', 'int32'), 5: ('availableReplicas', 'z', 'int32'),
        7: ('terminatingReplicas', '', 'int32'), 3: ('observedGeneration', 'z', 'int64'),
        6: ('conditions', 'r', 'apps.v1.ReplicaSetCondition'),
    },
    'apps.v1.RollingUpdateDaemonSet': {
        1: ('maxUnavailable', '', 'util.intstr.IntOrString'),
        2: ('maxSurge', '', 'util.intstr.IntOrString'),
    },
    'apps.v1.RollingUpdateDeployment': {
        1: ('maxUnavailable', '', 'util.intstr.IntOrString'),
        2: ('maxSurge', '', 'util.intstr.IntOrString'),
    },
    'apps.v1.RollingUpdateStatefulSetStrategy': {
        1: ('partition', '', 'int32'), 2: ('maxUnavailable', '', 'util.intstr.IntOrString'),
    },
    'apps.v1.StatefulSet': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'apps.v1.StatefulSetSpec'),
        3: ('status', 'z', 'apps.v1.StatefulSetStatus'),
    },
    'apps.v1.StatefulSetCondition': {
        1: ('type', '', 'string'), 2: ('status', '', 'string'),
        3: ('lastTransitionTime', 'z', 'meta.v1.Time'), 4: ('reason', 'z', 'string'),
        5: ('message', 'z', 'string'),
    },
    'apps.v1.StatefulSetOrdinals': {
        1: ('start', '', 'int32'),
    },
    'apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy': {
        1: ('whenDeleted', 'z', 'string'), 2: ('whenScaled', 'z', 'string'),
    },
    'apps.v1.StatefulSetSpec': {
        1: ('replicas', '', 'int32'), 2: ('selector', '', 'meta.v1.LabelSelector'),
        3: ('template', '', 'core.v1.PodTemplateSpec'),
        4: ('volumeClaimTemplates', 'r', 'core.v1.PersistentVolumeClaim'),
        5: ('serviceName', '', 'string'), 6: ('podManagementPolicy', 'z', 'string'),
        7: ('updateStrategy', 'z', 'apps.v1.StatefulSetUpdateStrategy'),
        8: ('revisionHistoryLimit', '', 'int32'), 9: ('minReadySeconds', 'z', 'int32'),
        10: ('persistentVolumeClaimRetentionPolicy', '',
            'apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy'),
        11: ('ordinals', '', 'apps.v1.StatefulSetOrdinals'),
    },
    'apps.v1.StatefulSetStatus': {
        1: ('observedGeneration', 'z', 'int64'), 2: ('replicas', '', 'int32'),
        3: ('readyReplicas', 'z', 'int32'), 4: ('currentReplicas', 'z', 'int32'),
        5: ('updatedReplicas', 'z', 'int32'), 6: ('currentRevision', 'z', 'string'),
        7: ('updateRevision', 'z', 'string'), 9: ('collisionCount', '', 'int32'),
        10: ('conditions', 'r', 'apps.v1.StatefulSetCondition'),
        11: ('availableReplicas', '', 'int32'),
    },
    'apps.v1.StatefulSetUpdateStrategy': {
        1: ('type', 'z', 'string'),
        2: ('rollingUpdate', '', 'apps.v1.RollingUpdateStatefulSetStrategy'),
    },
    'authentication.v1.BoundObjectReference': {
        1: ('kind', 'z', 'string'), 2: ('apiVersion', 'z', 'string'), 3: ('name', 'z', 'string'),
        4: ('uid', 'z', 'string'),
    },
    'authentication.v1.ExtraValue': {
        1: ('items', 'r', 'string'),
    },
    'authentication.v1.SelfSubjectReview': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('status', 'z', 'authentication.v1.SelfSubjectReviewStatus'),
    },
    'authentication.v1.SelfSubjectReviewStatus': {
        1: ('userInfo', 'z', 'authentication.v1.UserInfo'),
    },
    'authentication.v1.TokenRequest': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', '', 'authentication.v1.TokenRequestSpec'),
        3: ('status', 'z', 'authentication.v1.TokenRequestStatus'),
    },
    'authentication.v1.TokenRequestSpec': {
        1: ('audiences', 'r', 'string'), 4: ('expirationSeconds', '', 'int64'),
        3: ('boundObjectRef', '', 'authentication.v1.BoundObjectReference'),
    },
    'authentication.v1.TokenRequestStatus': {
        1: ('token', '', 'string'), 2: ('expirationTimestamp', '', 'meta.v1.Time'),
    },
    'authentication.v1.TokenReview': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', '', 'authentication.v1.TokenReviewSpec'),
        3: ('status', 'z', 'authentication.v1.TokenReviewStatus'),
    },
    'authentication.v1.TokenReviewSpec': {
        1: ('token', 'z', 'string'), 2: ('audiences', 'r', 'string'),
    },
    'authentication.v1.TokenReviewStatus': {
        1: ('authenticated', 'z', 'bool'), 2: ('user', 'z', 'authentication.v1.UserInfo'),
        4: ('audiences', 'r', 'string'), 3: ('error', 'z', 'string'),
    },
    'authentication.v1.UserInfo': {
        1: ('username', 'z', 'string'), 2: ('uid', 'z', 'string'), 3: ('groups', 'r', 'string'),
        4: ('extra', 'm', 'string,authentication.v1.ExtraValue'),
    },
    'authorization.v1.ExtraValue': {
        1: ('items', 'r', 'string'),
    },
    'authorization.v1.FieldSelectorAttributes': {
        1: ('rawSelector', 'z', 'string'),
        2: ('requirements', 'r', 'meta.v1.FieldSelectorRequirement'),
    },
    'authorization.v1.LabelSelectorAttributes': {
        1: ('rawSelector', 'z', 'string'),
        2: ('requirements', 'r', 'meta.v1.LabelSelectorRequirement'),
    },
    'authorization.v1.LocalSubjectAccessReview': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', '', 'authorization.v1.SubjectAccessReviewSpec'),
        3: ('status', 'z', 'authorization.v1.SubjectAccessReviewStatus'),
    },
    'authorization.v1.NonResourceAttributes': {
        1: ('path', 'z', 'string'), 2: ('verb', 'z', 'string'),
    },
    'authorization.v1.NonResourceRule': {
        1: ('verbs', 'r', 'string'), 2: ('nonResourceURLs', 'r', 'string'),
    },
    'authorization.v1.ResourceAttributes': {
        1: ('namespace', 'z', 'string'), 2: ('verb', 'z', 'string'), 3: ('group', 'z', 'string'),
        4: ('version', 'z', 'string'), 5: ('resource', 'z', 'string'),
        6: ('subresource', 'z', 'string'), 7: ('name', 'z', 'string'),
        8: ('fieldSelector', '', 'authorization.v1.FieldSelectorAttributes'),
        9: ('labelSelector', '', 'authorization.v1.LabelSelectorAttributes'),
    },
    'authorization.v1.ResourceRule': {
        1: ('verbs', 'r', 'string'), 2: ('apiGroups', 'r', 'string'),
        3: ('resources', 'r', 'string'), 4: ('resourceNames', 'r', 'string'),
    },
    'authorization.v1.SelfSubjectAccessReview': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', '', 'authorization.v1.SelfSubjectAccessReviewSpec'),
        3: ('status', 'z', 'authorization.v1.SubjectAccessReviewStatus'),
    },
    'authorization.v1.SelfSubjectAccessReviewSpec': {
        1: ('resourceAttributes', '', 'authorization.v1.ResourceAttributes'),
        2: ('nonResourceAttributes', '', 'authorization.v1.NonResourceAttributes'),
    },
    'authorization.v1.SelfSubjectRulesReview': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', '', 'authorization.v1.SelfSubjectRulesReviewSpec'),
        3: ('status', 'z', 'authorization.v1.SubjectRulesReviewStatus'),
    },
    'authorization.v1.SelfSubjectRulesReviewSpec': {
        1: ('namespace', 'z', 'string'),
    },
    'authorization.v1.SubjectAccessReview': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', '', 'authorization.v1.SubjectAccessReviewSpec'),
        3: ('status', 'z', 'authorization.v1.SubjectAccessReviewStatus'),
    },
    'authorization.v1.SubjectAccessReviewSpec': {
        1: ('resourceAttributes', '', 'authorization.v1.ResourceAttributes'),
        2: ('nonResourceAttributes', '', 'authorization.v1.NonResourceAttributes'),
        3: ('user', 'z', 'string'), 4: ('groups', 'r', 'string'),
        5: ('extra', 'm', 'string,authorization.v1.ExtraValue'), 6: ('uid', 'z', 'string'),
    },
    'authorization.v1.SubjectAccessReviewStatus': {
        1: ('allowed', '', 'bool'), 4: ('denied', 'z', 'bool'), 2: ('reason', 'z', 'string'),
        3: ('evaluationError', 'z', 'string'),
    },
    'authorization.v1.SubjectRulesReviewStatus': {
        1: ('resourceRules', 'r', 'authorization.v1.ResourceRule'),
        2: ('nonResourceRules', 'r', 'authorization.v1.NonResourceRule'),
        3: ('incomplete', '', 'bool'), 4: ('evaluationError', 'z', 'string'),
    },
    'autoscaling.v1.Scale': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'autoscaling.v1.ScaleSpec'),
        3: ('status', 'z', 'autoscaling.v1.ScaleStatus'),
    },
    'autoscaling.v1.ScaleSpec': {
        1: ('replicas', 'z', 'int32'),
    },
    'autoscaling.v1.ScaleStatus': {
        1: ('replicas', '', 'int32'), 2: ('selector', 'z', 'string'),
    },
    'batch.v1.CronJob': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'batch.v1.CronJobSpec'),
        3: ('status', 'z', 'batch.v1.CronJobStatus'),
    },
    'batch.v1.CronJobSpec': {
        1: ('schedule', '', 'string'), 8: ('timeZone', '', 'string'),
        2: ('startingDeadlineSeconds', '', 'int64'), 3: ('concurrencyPolicy', 'z', 'string'),
        4: ('suspend', '', 'bool'), 5: ('jobTemplate', '', 'batch.v1.JobTemplateSpec'),
        6: ('successfulJobsHistoryLimit', '', 'int32'), 7: ('failedJobsHistoryLimit', '', 'int32'),
    },
    'batch.v1.CronJobStatus': {
        1: ('active', 'r', 'core.v1.ObjectReference'), 4: ('lastScheduleTime', '', 'meta.v1.Time'),
        5: ('lastSuccessfulTime', '', 'meta.v1.Time'),
    },
    'batch.v1.Job': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'batch.v1.JobSpec'),
        3: ('status', 'z', 'batch.v1.JobStatus'),
    },
    'batch.v1.JobCondition': {
        1: ('type', '', 'string'), 2: ('status', '', 'string'),
        3: ('lastProbeTime', 'z', 'meta.v1.Time'), 4: ('lastTransitionTime', 'z', 'meta.v1.Time'),
        5: ('reason', 'z', 'string'), 6: ('message', 'z', 'string'),
    },
    'batch.v1.JobSpec': {
        1: ('parallelism', '', 'int32'), 2: ('completions', '', 'int32'),
        3: ('activeDeadlineSeconds', '', 'int64'),
        11: ('podFailurePolicy', '', 'batch.v1.PodFailurePolicy'),
        16: ('successPolicy', '', 'batch.v1.SuccessPolicy'), 7: ('backoffLimit', '', 'int32'),
        12: ('backoffLimitPerIndex', '', 'int32'), 13: ('maxFailedIndexes', '', 'int32'),
        4: ('selector', '', 'meta.v1.LabelSelector'), 5: ('manualSelector', '', 'bool'),
        6: ('template', '', 'core.v1.PodTemplateSpec'),
        8: ('ttlSecondsAfterFinished', '', 'int32'), 9: ('completionMode', '', 'string'),
        10: ('suspend', '', 'bool'), 14: ('podReplacementPolicy', '', 'string'),
        15: ('managedBy', '', 'string'),
    },
    'batch.v1.JobStatus': {
        1: ('conditions', 'r', 'batch.v1.JobCondition'), 2: ('startTime', '', 'meta.v1.Time'),
        3: ('completionTime', '', 'meta.v1.Time'), 4: ('active', 'z', 'int32'),
        5: ('succeeded', 'z', 'int32'), 6: ('failed', 'z', 'int32'),
        11: ('terminating', '', 'int32'), 7: ('completedIndexes', 'z', 'string'),
        10: ('failedIndexes', '', 'string'),
        8: ('uncountedTerminatedPods', '', 'batch.v1.UncountedTerminatedPods'),
        9: ('ready', '', 'int32'),
    },
    'batch.v1.JobTemplateSpec': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'batch.v1.JobSpec'),
    },
    'batch.v1.PodFailurePolicy': {
        1: ('rules', 'r', 'batch.v1.PodFailurePolicyRule'),
    },
    'batch.v1.PodFailurePolicyOnExitCodesRequirement': {
        1: ('containerName', '', 'string'), 2: ('operator', '', 'string'),
        3: ('values', 'r', 'int32'),
    },
    'batch.v1.PodFailurePolicyOnPodConditionsPattern': {
        1: ('type', '', 'string'), 2: ('status', '', 'string'),
    },
    'batch.v1.PodFailurePolicyRule': {
        1: ('action', '', 'string'),
        2: ('onExitCodes', '', 'batch.v1.PodFailurePolicyOnExitCodesRequirement'),
        3: ('onPodConditions', 'r', 'batch.v1.PodFailurePolicyOnPodConditionsPattern'),
    },
    'batch.v1.SuccessPolicy': {
        1: ('rules', 'r', 'batch.v1.SuccessPolicyRule'),
    },
    'batch.v1.SuccessPolicyRule': {
        1: ('succeededIndexes', '', 'string'), 2: ('succeededCount', '', 'int32'),
    },
    'batch.v1.UncountedTerminatedPods': {
        1: ('succeeded', 'r', 'string'), 2: ('failed', 'r', 'string'),
    },
    'coordination.v1.Lease': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'coordination.v1.LeaseSpec'),
    },
    'coordination.v1.LeaseSpec': {
        1: ('holderIdentity', '', 'string'), 2: ('leaseDurationSeconds', '', 'int32'),
        3: ('acquireTime', '', 'meta.v1.MicroTime'), 4: ('renewTime', '', 'meta.v1.MicroTime'),
        5: ('leaseTransitions', '', 'int32'), 6: ('strategy', '', 'string'),
        7: ('preferredHolder', '', 'string'),
    },
    'core.v1.AWSElasticBlockStoreVolumeSource': {
        1: ('volumeID', '', 'string'), 2: ('fsType', 'z', 'string'),
        3: ('partition', 'z', 'int32'), 4: ('readOnly', 'z', 'bool'),
    },
    'core.v1.Affinity': {
        1: ('nodeAffinity', '', 'core.v1.NodeAffinity'),
        2: ('podAffinity', '', 'core.v1.PodAffinity'),
        3: ('podAntiAffinity', '', 'core.v1.PodAntiAffinity'),
    },
    'core.v1.AppArmorProfile': {
        1: ('type', '', 'string'), 2: ('localhostProfile', '', 'string'),
    },
    'core.v1.AttachedVolume': {
        1: ('name', '', 'string'), 2: ('devicePath', '', 'string'),
    },
    'core.v1.AzureDiskVolumeSource': {
        1: ('diskName', '', 'string'), 2: ('diskURI', '', 'string'),
        3: ('cachingMode', '', 'string'), 4: ('fsType', '', 'string'), 5: ('readOnly', '', 'bool'),
        6: ('kind', '', 'string'),
    },
    'core.v1.AzureFilePersistentVolumeSource': {
        1: ('secretName', '', 'string'), 2: ('shareName', '', 'string'),
        3: ('readOnly', 'z', 'bool'), 4: ('secretNamespace', '', 'string'),
    },
    'core.v1.AzureFileVolumeSource': {
        1: ('secretName', '', 'string'), 2: ('shareName', '', 'string'),
        3: ('readOnly', 'z', 'bool'),
    },
    'core.v1.Binding': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('target', '', 'core.v1.ObjectReference'),
    },
    'core.v1.CSIPersistentVolumeSource': {
        1: ('driver', '', 'string'), 2: ('volumeHandle', '', 'string'),
        3: ('readOnly', 'z', 'bool'), 4: ('fsType', 'z', 'string'),
        5: ('volumeAttributes', 'm', 'string,string'),
        6: ('controllerPublishSecretRef', '', 'core.v1.SecretReference'),
        7: ('nodeStageSecretRef', '', 'core.v1.SecretReference'),
        8: ('nodePublishSecretRef', '', 'core.v1.SecretReference'),
        9: ('controllerExpandSecretRef', '', 'core.v1.SecretReference'),
        10: ('nodeExpandSecretRef', '', 'core.v1.SecretReference'),
    },
    'core.v1.CSIVolumeSource': {
        1: ('driver', '', 'string'), 2: ('readOnly', '', 'bool'), 3: ('fsType', '', 'string'),
        4: ('volumeAttributes', 'm', 'string,string'),
        5: ('nodePublishSecretRef', '', 'core.v1.LocalObjectReference'),
    },
    'core.v1.Capabilities': {
        1: ('add', 'r', 'string'), 2: ('drop', 'r', 'string'),
    },
    'core.v1.CephFSPersistentVolumeSource': {
        1: ('monitors', 'r', 'string'), 2: ('path', 'z', 'string'), 3: ('user', 'z', 'string'),
        4: ('secretFile', 'z', 'string'), 5: ('secretRef', '', 'core.v1.SecretReference'),
        6: ('readOnly', 'z', 'bool'),
    },
    'core.v1.CephFSVolumeSource': {
        1: ('monitors', 'r', 'string'), 2: ('path', 'z', 'string'), 3: ('user', 'z', 'string'),
        4: ('secretFile', 'z', 'string'), 5: ('secretRef', '', 'core.v1.LocalObjectReference'),
        6: ('readOnly', 'z', 'bool'),
    },
    'core.v1.CinderPersistentVolumeSource': {
        1: ('volumeID', '', 'string'), 2: ('fsType', 'z', 'string'), 3: ('readOnly', 'z', 'bool'),
        4: ('secretRef', '', 'core.v1.SecretReference'),
    },
    'core.v1.CinderVolumeSource': {
        1: ('volumeID', '', 'string'), 2: ('fsType', 'z', 'string'), 3: ('readOnly', 'z', 'bool'),
        4: ('secretRef', '', 'core.v1.LocalObjectReference'),
    },
    'core.v1.ClientIPConfig': {
        1: ('timeoutSeconds', '', 'int32'),
    },
    'core.v1.ClusterTrustBundleProjection': {
        1: ('name', '', 'string'), 2: ('signerName', '', 'string'),
        3: ('labelSelector', '', 'meta.v1.LabelSelector'), 5: ('optional', '', 'bool'),
        4: ('path', '', 'string'),
    },
    'core.v1.ConfigMap': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 4: ('immutable', '', 'bool'),
        2: ('data', 'm', 'string,string'), 3: ('binaryData', 'm', 'string,bytes'),
    },
    'core.v1.ConfigMapEnvSource': {
        1: ('localObjectReference', 'i', 'core.v1.LocalObjectReference'),
        2: ('optional', '', 'bool'),
    },
    'core.v1.ConfigMapKeySelector': {
        1: ('localObjectReference', 'i', 'core.v1.LocalObjectReference'), 2: ('key', '', 'string'),
        3: ('optional', '', 'bool'),
    },
    'core.v1.ConfigMapNodeConfigSource': {
        1: ('namespace', '', 'string'), 2: ('name', '', 'string'), 3: ('uid', 'z', 'string'),
        4: ('resourceVersion', 'z', 'string'), 5: ('kubeletConfigKey', '', 'string'),
    },
    'core.v1.ConfigMapProjection': {
        1: ('localObjectReference', 'i', 'core.v1.LocalObjectReference'),
        2: ('items', 'r', 'core.v1.KeyToPath'), 4: ('optional', '', 'bool'),
    },
    'core.v1.ConfigMapVolumeSource': {
        1: ('localObjectReference', 'i', 'core.v1.LocalObjectReference'),
        2: ('items', 'r', 'core.v1.KeyToPath'), 3: ('defaultMode', '', 'int32'),
        4: ('optional', '', 'bool'),
    },
    'core.v1.Container': {
        1: ('name', '', 'string'), 2: ('image', 'z', 'string'), 3: ('command', 'r', 'string'),
        4: ('args', 'r', 'string'), 5: ('workingDir', 'z', 'string'),
        6: ('ports', 'r', 'core.v1.ContainerPort'), 19: ('envFrom', 'r', 'core.v1.EnvFromSource'),
        7: ('env', 'r', 'core.v1.EnvVar'), 8: ('resources', 'z', 'core.v1.ResourceRequirements'),
        23: ('resizePolicy', 'r', 'core.v1.ContainerResizePolicy'),
        24: ('restartPolicy', '', 'string'),
        25: ('restartPolicyRules', 'r', 'core.v1.ContainerRestartRule'),
        9: ('volumeMounts', 'r', 'core.v1.VolumeMount'),
        21: ('volumeDevices', 'r', 'core.v1.VolumeDevice'),
        10: ('livenessProbe', '', 'core.v1.Probe'), 11: ('readinessProbe', '', 'core.v1.Probe'),
        22: ('startupProbe', '', 'core.v1.Probe'), 12: ('lifecycle', '', 'core.v1.Lifecycle'),
        13: ('terminationMessagePath', 'z', 'string'),
        20: ('terminationMessagePolicy', 'z', 'string'), 14: ('imagePullPolicy', 'z', 'string'),
        15: ('securityContext', '', 'core.v1.SecurityContext'), 16: ('stdin', 'z', 'bool'),
        17: ('stdinOnce', 'z', 'bool'), 18: ('tty', 'z', 'bool'),
    },
    'core.v1.ContainerExtendedResourceRequest': {
        1: ('containerName', '', 'string'), 2: ('resourceName', '', 'string'),
        3: ('requestName', '', 'string'),
    },
    'core.v1.ContainerImage': {
        1: ('names', 'r', 'string'), 2: ('sizeBytes', 'z', 'int64'),
    },
    'core.v1.ContainerPort': {
        1: ('name', 'z', 'string'), 2: ('hostPort', 'z', 'int32'),
        3: ('containerPort', '', 'int32'), 4: ('protocol', 'z', 'string'),
        5: ('hostIP', 'z', 'string'),
    },
    'core.v1.ContainerResizePolicy': {
        1: ('resourceName', '', 'string'), 2: ('restartPolicy', '', 'string'),
    },
    'core.v1.ContainerRestartRule': {
        1: ('action', 'z', 'string'),
        2: ('exitCodes', '', 'core.v1.ContainerRestartRuleOnExitCodes'),
    },
    'core.v1.ContainerRestartRuleOnExitCodes': {
        1: ('operator', 'z', 'string'), 2: ('values', 'r', 'int32'),
    },
    'core.v1.ContainerState': {
        1: ('waiting', '', 'core.v1.ContainerStateWaiting'),
        2: ('running', '', 'core.v1.ContainerStateRunning'),
        3: ('terminated', '', 'core.v1.ContainerStateTerminated'),
    },
    'core.v1.ContainerStateRunning': {
        1: ('startedAt', 'z', 'meta.v1.Time'),
    },
    'core.v1.ContainerStateTerminated': {
        1: ('exitCode', '', 'int32'), 2: ('signal', 'z', 'int32'), 3: ('reason', 'z', 'string'),
        4: ('message', 'z', 'string'), 5: ('startedAt', 'z', 'meta.v1.Time'),
        6: ('finishedAt', 'z', 'meta.v1.Time'), 7: ('containerID', 'z', 'string'),
    },
    'core.v1.ContainerStateWaiting': {
        1: ('reason', 'z', 'string'), 2: ('message', 'z', 'string'),
    },
    'core.v1.ContainerStatus': {
        1: ('name', '', 'string'), 2: ('state', 'z', 'core.v1.ContainerState'),
        3: ('lastState', 'z', 'core.v1.ContainerState'), 4: ('ready', '', 'bool'),
        5: ('restartCount', '', 'int32'), 6: ('image', '', 'string'), 7: ('imageID', '', 'string'),
        8: ('containerID', 'z', 'string'), 9: ('started', '', 'bool'),
        10: ('allocatedResources', 'm', 'string,api.resource.Quantity'),
        11: ('resources', '', 'core.v1.ResourceRequirements'),
        12: ('volumeMounts', 'r', 'core.v1.VolumeMountStatus'),
        13: ('user', '', 'core.v1.ContainerUser'),
        14: ('allocatedResourcesStatus', 'r', 'core.v1.ResourceStatus'),
        15: ('stopSignal', '', 'string'),
    },
    'core.v1.ContainerUser': {
        1: ('linux', '', 'core.v1.LinuxContainerUser'),
    },
    'core.v1.DaemonEndpoint': {
        1: ('Port', '', 'int32'),
    },
    'core.v1.DownwardAPIProjection': {
        1: ('items', 'r', 'core.v1.DownwardAPIVolumeFile'),
    },
    'core.v1.DownwardAPIVolumeFile': {
        1: ('path', '', 'string'), 2: ('fieldRef', '', 'core.v1.ObjectFieldSelector'),
        3: ('resourceFieldRef', '', 'core.v1.ResourceFieldSelector'), 4: ('mode', '', 'int32'),
    },
    'core.v1.DownwardAPIVolumeSource': {
        1: ('items', 'r', 'core.v1.DownwardAPIVolumeFile'), 2: ('defaultMode', '', 'int32'),
    },
    'core.v1.EmptyDirVolumeSource': {
        1: ('medium', 'z', 'string'), 2: ('sizeLimit', '', 'api.resource.Quantity'),
    },
    'core.v1.EndpointAddress': {
        1: ('ip', '', 'string'), 3: ('hostname', 'z', 'string'), 4: ('nodeName', '', 'string'),
        2: ('targetRef', '', 'core.v1.ObjectReference'),
    },
    'core.v1.EndpointPort': {
        1: ('name', 'z', 'string'), 2: ('port', '', 'int32'), 3: ('protocol', 'z', 'string'),
        4: ('appProtocol', '', 'string'),
    },
    'core.v1.EndpointSubset': {
        1: ('addresses', 'r', 'core.v1.EndpointAddress'),
        2: ('notReadyAddresses', 'r', 'core.v1.EndpointAddress'),
        3: ('ports', 'r', 'core.v1.EndpointPort'),
    },
    'core.v1.Endpoints': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('subsets', 'r', 'core.v1.EndpointSubset'),
    },
    'core.v1.EnvFromSource': {
        1: ('prefix', 'z', 'string'), 2: ('configMapRef', '', 'core.v1.ConfigMapEnvSource'),
        3: ('secretRef', '', 'core.v1.SecretEnvSource'),
    },
    'core.v1.EnvVar': {
        1: ('name', '', 'string'), 2: ('value', 'z', 'string'),
        3: ('valueFrom', '', 'core.v1.EnvVarSource'),
    },
    'core.v1.EnvVarSource': {
        1: ('fieldRef', '', 'core.v1.ObjectFieldSelector'),
        2: ('resourceFieldRef', '', 'core.v1.ResourceFieldSelector'),
        3: ('configMapKeyRef', '', 'core.v1.ConfigMapKeySelector'),
        4: ('secretKeyRef', '', 'core.v1.SecretKeySelector'),
        5: ('fileKeyRef', '', 'core.v1.FileKeySelector'),
    },
    'core.v1.EphemeralContainer': {
        1: ('ephemeralContainerCommon', 'i', 'core.v1.EphemeralContainerCommon'),
        2: ('targetContainerName', 'z', 'string'),
    },
    'core.v1.EphemeralContainerCommon': {
        1: ('name', '', 'string'), 2: ('image', 'z', 'string'), 3: ('command', 'r', 'string'),
        4: ('args', 'r', 'string'), 5: ('workingDir', 'z', 'string'),
        6: ('ports', 'r', 'core.v1.ContainerPort'), 19: ('envFrom', 'r', 'core.v1.EnvFromSource'),
        7: ('env', 'r', 'core.v1.EnvVar'), 8: ('resources', 'z', 'core.v1.ResourceRequirements'),
        23: ('resizePolicy', 'r', 'core.v1.ContainerResizePolicy'),
        24: ('restartPolicy', '', 'string'),
        25: ('restartPolicyRules', 'r', 'core.v1.ContainerRestartRule'),
        9: ('volumeMounts', 'r', 'core.v1.VolumeMount'),
        21: ('volumeDevices', 'r', 'core.v1.VolumeDevice'),
        10: ('livenessProbe', '', 'core.v1.Probe'), 11: ('readinessProbe', '', 'core.v1.Probe'),
        22: ('startupProbe', '', 'core.v1.Probe'), 12: ('lifecycle', '', 'core.v1.Lifecycle'),
        13: ('terminationMessagePath', 'z', 'string'),
        20: ('terminationMessagePolicy', 'z', 'string'), 14: ('imagePullPolicy', 'z', 'string'),
        15: ('securityContext', '', 'core.v1.SecurityContext'), 16: ('stdin', 'z', 'bool'),
        17: ('stdinOnce', 'z', 'bool'), 18: ('tty', 'z', 'bool'),
    },
    'core.v1.EphemeralVolumeSource': {
        1: ('volumeClaimTemplate', '', 'core.v1.PersistentVolumeClaimTemplate'),
    },
    'core.v1.Event': {
        1: ('metadata', '', 'meta.v1.ObjectMeta'),
        2: ('involvedObject', '', 'core.v1.ObjectReference'), 3: ('reason', 'z', 'string'),
        4: ('message', 'z', 'string'), 5: ('source', 'z', 'core.v1.EventSource'),
        6: ('firstTimestamp', 'z', 'meta.v1.Time'), 7: ('lastTimestamp', 'z', 'meta.v1.Time'),
        8: ('count', 'z', 'int32'), 9: ('type', 'z', 'string'),
        10: ('eventTime', 'z', 'meta.v1.MicroTime'), 11: ('series', '', 'core.v1.EventSeries'),
        12: ('action', 'z', 'string'), 13: ('related', '', 'core.v1.ObjectReference'),
        14: ('reportingComponent', '', 'string'), 15: ('reportingInstance', '', 'string'),
    },
    'core.v1.EventSeries': {
        1: ('count', 'z', 'int32'), 2: ('lastObservedTime', 'z', 'meta.v1.MicroTime'),
    },
    'core.v1.EventSource': {
        1: ('component', 'z', 'string'), 2: ('host', 'z', 'string'),
    },
    'core.v1.ExecAction': {
        1: ('command', 'r', 'string'),
    },
    'core.v1.FCVolumeSource': {
        1: ('targetWWNs', 'r', 'string'), 2: ('lun', '', 'int32'), 3: ('fsType', 'z', 'string'),
        4: ('readOnly', 'z', 'bool'), 5: ('wwids', 'r', 'string'),
    },
    'core.v1.FileKeySelector': {
        1: ('volumeName', '', 'string'), 2: ('path', '', 'string'), 3: ('key', '', 'string'),
        4: ('optional', '', 'bool'),
    },
    'core.v1.FlexPersistentVolumeSource': {
        1: ('driver', '', 'string'), 2: ('fsType', 'z', 'string'),
        3: ('secretRef', '', 'core.v1.SecretReference'), 4: ('readOnly', 'z', 'bool'),
        5: ('options', 'm', 'string,string'),
    },
    'core.v1.FlexVolumeSource': {
        1: ('driver', '', 'string'), 2: ('fsType', 'z', 'string'),
        3: ('secretRef', '', 'core.v1.LocalObjectReference'), 4: ('readOnly', 'z', 'bool'),
        5: ('options', 'm', 'string,string'),
    },
    'core.v1.FlockerVolumeSource': {
        1: ('datasetName', 'z', 'string'), 2: ('datasetUUID', 'z', 'string'),
    },
    'core.v1.GCEPersistentDiskVolumeSource': {
        1: ('pdName', '', 'string'), 2: ('fsType', 'z', 'string'), 3: ('partition', 'z', 'int32'),
        4: ('readOnly', 'z', 'bool'),
    },
    'core.v1.GRPCAction': {
        1: ('port', '', 'int32'), 2: ('service', '', 'string'),
    },
    'core.v1.GitRepoVolumeSource': {
        1: ('repository', '', 'string'), 2: ('revision', 'z', 'string'),
        3: ('directory', 'z', 'string'),
    },
    'core.v1.GlusterfsPersistentVolumeSource': {
        1: ('endpoints', '', 'string'), 2: ('path', '', 'string'), 3: ('readOnly', 'z', 'bool'),
        4: ('endpointsNamespace', '', 'string'),
    },
    'core.v1.GlusterfsVolumeSource': {
        1: ('endpoints', '', 'string'), 2: ('path', '', 'string'), 3: ('readOnly', 'z', 'bool'),
    },
    'core.v1.HTTPGetAction': {
        1: ('path', 'z', 'string'), 2: ('port', '', 'util.intstr.IntOrString'),
        3: ('host', 'z', 'string'), 4: ('scheme', 'z', 'string'),
        5: ('httpHeaders', 'r', 'core.v1.HTTPHeader'),
    },
    'core.v1.HTTPHeader': {
        1: ('name', '', 'string'), 2: ('value', '', 'string'),
    },
    'core.v1.HostAlias': {
        1: ('ip', '', 'string'), 2: ('hostnames', 'r', 'string'),
    },
    'core.v1.HostIP': {
        1: ('ip', '', 'string'),
    },
    'core.v1.HostPathVolumeSource': {
        1: ('path', '', 'string'), 2: ('type', '', 'string'),
    },
    'core.v1.ISCSIPersistentVolumeSource': {
        1: ('targetPortal', '', 'string'), 2: ('iqn', '', 'string'), 3: ('lun', '', 'int32'),
        4: ('iscsiInterface', 'z', 'string'), 5: ('fsType', 'z', 'string'),
        6: ('readOnly', 'z', 'bool'), 7: ('portals', 'r', 'string'),
        8: ('chapAuthDiscovery', 'z', 'bool'), 11: ('chapAuthSession', 'z', 'bool'),
        10: ('secretRef', '', 'core.v1.SecretReference'), 12: ('initiatorName', '', 'string'),
    },
    'core.v1.ISCSIVolumeSource': {
        1: ('targetPortal', '', 'string'), 2: ('iqn', '', 'string'), 3: ('lun', '', 'int32'),
        4: ('iscsiInterface', 'z', 'string'), 5: ('fsType', 'z', 'string'),
        6: ('readOnly', 'z', 'bool'), 7: ('portals', 'r', 'string'),
        8: ('chapAuthDiscovery', 'z', 'bool'), 11: ('chapAuthSession', 'z', 'bool'),
        10: ('secretRef', '', 'core.v1.LocalObjectReference'), 12: ('initiatorName', '', 'string'),
    },
    'core.v1.ImageVolumeSource': {
        1: ('reference', 'z', 'string'), 2: ('pullPolicy', 'z', 'string'),
    },
    'core.v1.ImageVolumeStatus': {
        1: ('imageRef', 'z', 'string'),
    },
    'core.v1.KeyToPath': {
        1: ('key', '', 'string'), 2: ('path', '', 'string'), 3: ('mode', '', 'int32'),
    },
    'core.v1.Lifecycle': {
        1: ('postStart', '', 'core.v1.LifecycleHandler'),
        2: ('preStop', '', 'core.v1.LifecycleHandler'), 3: ('stopSignal', '', 'string'),
    },
    'core.v1.LifecycleHandler': {
        1: ('exec', '', 'core.v1.ExecAction'), 2: ('httpGet', '', 'core.v1.HTTPGetAction'),
        3: ('tcpSocket', '', 'core.v1.TCPSocketAction'), 4: ('sleep', '', 'core.v1.SleepAction'),
    },
    'core.v1.LimitRange': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'core.v1.LimitRangeSpec'),
    },
    'core.v1.LimitRangeItem': {
        1: ('type', '', 'string'), 2: ('max', 'm', 'string,api.resource.Quantity'),
        3: ('min', 'm', 'string,api.resource.Quantity'),
        4: ('default', 'm', 'string,api.resource.Quantity'),
        5: ('defaultRequest', 'm', 'string,api.resource.Quantity'),
        6: ('maxLimitRequestRatio', 'm', 'string,api.resource.Quantity'),
    },
    'core.v1.LimitRangeSpec': {
        1: ('limits', 'r', 'core.v1.LimitRangeItem'),
    },
    'core.v1.LinuxContainerUser': {
        1: ('uid', '', 'int64'), 2: ('gid', '', 'int64'), 3: ('supplementalGroups', 'r', 'int64'),
    },
    'core.v1.LoadBalancerIngress': {
        1: ('ip', 'z', 'string'), 2: ('hostname', 'z', 'string'), 3: ('ipMode', '', 'string'),
        4: ('ports', 'r', 'core.v1.PortStatus'),
    },
    'core.v1.LoadBalancerStatus': {
        1: ('ingress', 'r', 'core.v1.LoadBalancerIngress'),
    },
    'core.v1.LocalObjectReference': {
        1: ('name', 'z', 'string'),
    },
    'core.v1.LocalVolumeSource': {
        1: ('path', '', 'string'), 2: ('fsType', '', 'string'),
    },
    'core.v1.ModifyVolumeStatus': {
        1: ('targetVolumeAttributesClassName', 'z', 'string'), 2: ('status', '', 'string'),
    },
    'core.v1.NFSVolumeSource': {
        1: ('server', '', 'string'), 2: ('path', '', 'string'), 3: ('readOnly', 'z', 'bool'),
    },
    'core.v1.Namespace': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'core.v1.NamespaceSpec'),
        3: ('status', 'z', 'core.v1.NamespaceStatus'),
    },
    'core.v1.NamespaceCondition': {
        1: ('type', '', 'string'), 2: ('status', '', 'string'),
        4: ('lastTransitionTime', 'z', 'meta.v1.Time'), 5: ('reason', 'z', 'string'),
        6: ('message', 'z', 'string'),
    },
    'core.v1.NamespaceSpec': {
        1: ('finalizers', 'r', 'string'),
    },
    'core.v1.NamespaceStatus': {
        1: ('phase', 'z', 'string'), 2: ('conditions', 'r', 'core.v1.NamespaceCondition'),
    },
    'core.v1.Node': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'core.v1.NodeSpec'),
        3: ('status', 'z', 'core.v1.NodeStatus'),
    },
    'core.v1.NodeAddress': {
        1: ('type', '', 'string'), 2: ('address', '', 'string'),
    },
    'core.v1.NodeAffinity': {
        1: ('requiredDuringSchedulingIgnoredDuringExecution', '', 'core.v1.NodeSelector'),
        2: ('preferredDuringSchedulingIgnoredDuringExecution', 'r',
            'core.v1.PreferredSchedulingTerm'),
    },
    'core.v1.NodeAllocatableResourceClaimStatus': {
        1: ('resourceClaimName', '', 'string'), 2: ('containers', 'r', 'string'),
        3: ('resources', 'm', 'string,api.resource.Quantity'),
    },
    'core.v1.NodeCondition': {
        1: ('type', '', 'string'), 2: ('status', '', 'string'),
        3: ('lastHeartbeatTime', 'z', 'meta.v1.Time'),
        4: ('lastTransitionTime', 'z', 'meta.v1.Time'), 5: ('reason', 'z', 'string'),
        6: ('message', 'z', 'string'),
    },
    'core.v1.NodeConfigSource': {
        2: ('configMap', '', 'core.v1.ConfigMapNodeConfigSource'),
    },
    'core.v1.NodeConfigStatus': {
        1: ('assigned', '', 'core.v1.NodeConfigSource'),
        2: ('active', '', 'core.v1.NodeConfigSource'),
        3: ('lastKnownGood', '', 'core.v1.NodeConfigSource'), 4: ('error', 'z', 'string'),
    },
    'core.v1.NodeDaemonEndpoints': {
        1: ('kubeletEndpoint', 'z', 'core.v1.DaemonEndpoint'),
    },
    'core.v1.NodeFeatures': {
        1: ('supplementalGroupsPolicy', '', 'bool'),
    },
    'core.v1.NodeRuntimeHandler': {
        1: ('name', '', 'string'), 2: ('features', '', 'core.v1.NodeRuntimeHandlerFeatures'),
    },
    'core.v1.NodeRuntimeHandlerFeatures': {
        1: ('recursiveReadOnlyMounts', '', 'bool'), 2: ('userNamespaces', '', 'bool'),
    },
    'core.v1.NodeSelector': {
        1: ('nodeSelectorTerms', 'r', 'core.v1.NodeSelectorTerm'),
    },
    'core.v1.NodeSelectorRequirement': {
        1: ('key', '', 'string'), 2: ('operator', '', 'string'), 3: ('values', 'r', 'string'),
    },
    'core.v1.NodeSelectorTerm': {
        1: ('matchExpressions', 'r', 'core.v1.NodeSelectorRequirement'),
        2: ('matchFields', 'r', 'core.v1.NodeSelectorRequirement'),
    },
    'core.v1.NodeSpec': {
        1: ('podCIDR', 'z', 'string'), 7: ('podCIDRs', 'r', 'string'),
        3: ('providerID', 'z', 'string'), 4: ('unschedulable', 'z', 'bool'),
        5: ('taints', 'r', 'core.v1.Taint'), 6: ('configSource', '', 'core.v1.NodeConfigSource'),
        2: ('externalID', 'z', 'string'),
    },
    'core.v1.NodeStatus': {
        1: ('capacity', 'm', 'string,api.resource.Quantity'),
        2: ('allocatable', 'm', 'string,api.resource.Quantity'), 3: ('phase', 'z', 'string'),
        4: ('conditions', 'r', 'core.v1.NodeCondition'),
        5: ('addresses', 'r', 'core.v1.NodeAddress'),
        6: ('daemonEndpoints', 'z', 'core.v1.NodeDaemonEndpoints'),
        7: ('nodeInfo', 'z', 'core.v1.NodeSystemInfo'),
        8: ('images', 'r', 'core.v1.ContainerImage'), 9: ('volumesInUse', 'r', 'string'),
        10: ('volumesAttached', 'r', 'core.v1.AttachedVolume'),
        11: ('config', '', 'core.v1.NodeConfigStatus'),
        12: ('runtimeHandlers', 'r', 'core.v1.NodeRuntimeHandler'),
        13: ('features', '', 'core.v1.NodeFeatures'), 14: ('declaredFeatures', 'r', 'string'),
    },
    'core.v1.NodeSwapStatus': {
        1: ('capacity', '', 'int64'),
    },
    'core.v1.NodeSystemInfo': {
        1: ('machineID', '', 'string'), 2: ('systemUUID', '', 'string'),
        3: ('bootID', '', 'string'), 4: ('kernelVersion', '', 'string'),
        5: ('osImage', '', 'string'), 6: ('containerRuntimeVersion', '', 'string'),
        7: ('kubeletVersion', '', 'string'), 8: ('kubeProxyVersion', '', 'string'),
        9: ('operatingSystem', '', 'string'), 10: ('architecture', '', 'string'),
        11: ('swap', '', 'core.v1.NodeSwapStatus'),
    },
    'core.v1.ObjectFieldSelector': {
        1: ('apiVersion', 'z', 'string'), 2: ('fieldPath', '', 'string'),
    },
    'core.v1.ObjectReference': {
        1: ('kind', 'z', 'string'), 2: ('namespace', 'z', 'string'), 3: ('name', 'z', 'string'),
        4: ('uid', 'z', 'string'), 5: ('apiVersion', 'z', 'string'),
        6: ('resourceVersion', 'z', 'string'), 7: ('fieldPath', 'z', 'string'),
    },
    'core.v1.PersistentVolume': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', 'z', 'core.v1.PersistentVolumeSpec'),
        3: ('status', 'z', 'core.v1.PersistentVolumeStatus'),
    },
    'core.v1.PersistentVolumeClaim': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', 'z', 'core.v1.PersistentVolumeClaimSpec'),
        3: ('status', 'z', 'core.v1.PersistentVolumeClaimStatus'),
    },
    'core.v1.PersistentVolumeClaimCondition': {
        1: ('type', '', 'string'), 2: ('status', '', 'string'),
        3: ('lastProbeTime', 'z', 'meta.v1.Time'), 4: ('lastTransitionTime', 'z', 'meta.v1.Time'),
        5: ('reason', 'z', 'string'), 6: ('message', 'z', 'string'),
    },
    'core.v1.PersistentVolumeClaimSpec': {
        1: ('accessModes', 'r', 'string'), 4: ('selector', '', 'meta.v1.LabelSelector'),
        2: ('resources', 'z', 'core.v1.VolumeResourceRequirements'),
        3: ('volumeName', 'z', 'string'), 5: ('storageClassName', '', 'string'),
        6: ('volumeMode', '', 'string'),
        7: ('dataSource', '', 'core.v1.TypedLocalObjectReference'),
        8: ('dataSourceRef', '', 'core.v1.TypedObjectReference'),
        9: ('volumeAttributesClassName', '', 'string'),
    },
    'core.v1.PersistentVolumeClaimStatus': {
        1: ('phase', 'z', 'string'), 2: ('accessModes', 'r', 'string'),
        3: ('capacity', 'm', 'string,api.resource.Quantity'),
        4: ('conditions', 'r', 'core.v1.PersistentVolumeClaimCondition'),
        5: ('allocatedResources', 'm', 'string,api.resource.Quantity'),
        7: ('allocatedResourceStatuses', 'm', 'string,string'),
        8: ('currentVolumeAttributesClassName', '', 'string'),
        9: ('modifyVolumeStatus', '', 'core.v1.ModifyVolumeStatus'),
    },
    'core.v1.PersistentVolumeClaimTemplate': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', '', 'core.v1.PersistentVolumeClaimSpec'),
    },
    'core.v1.PersistentVolumeClaimVolumeSource': {
        1: ('claimName', '', 'string'), 2: ('readOnly', 'z', 'bool'),
    },
    'core.v1.PersistentVolumeSource': {
        1: ('gcePersistentDisk', '', 'core.v1.GCEPersistentDiskVolumeSource'),
        2: ('awsElasticBlockStore', '', 'core.v1.AWSElasticBlockStoreVolumeSource'),
        3: ('hostPath', '', 'core.v1.HostPathVolumeSource'),
        4: ('glusterfs', '', 'core.v1.GlusterfsPersistentVolumeSource'),
        5: ('nfs', '', 'core.v1.NFSVolumeSource'),
        6: ('rbd', '', 'core.v1.RBDPersistentVolumeSource'),
        7: ('iscsi', '', 'core.v1.ISCSIPersistentVolumeSource'),
        8: ('cinder', '', 'core.v1.CinderPersistentVolumeSource'),
        9: ('cephfs', '', 'core.v1.CephFSPersistentVolumeSource'),
        10: ('fc', '', 'core.v1.FCVolumeSource'),
        11: ('flocker', '', 'core.v1.FlockerVolumeSource'),
        12: ('flexVolume', '', 'core.v1.FlexPersistentVolumeSource'),
        13: ('azureFile', '', 'core.v1.AzureFilePersistentVolumeSource'),
        14: ('vsphereVolume', '', 'core.v1.VsphereVirtualDiskVolumeSource'),
        15: ('quobyte', '', 'core.v1.QuobyteVolumeSource'),
        16: ('azureDisk', '', 'core.v1.AzureDiskVolumeSource'),
        17: ('photonPersistentDisk', '', 'core.v1.PhotonPersistentDiskVolumeSource'),
        18: ('portworxVolume', '', 'core.v1.PortworxVolumeSource'),
        19: ('scaleIO', '', 'core.v1.ScaleIOPersistentVolumeSource'),
        20: ('local', '', 'core.v1.LocalVolumeSource'),
        21: ('storageos', '', 'core.v1.StorageOSPersistentVolumeSource'),
        22: ('csi', '', 'core.v1.CSIPersistentVolumeSource'),
    },
    'core.v1.PersistentVolumeSpec': {
        1: ('capacity', 'm', 'string,api.resource.Quantity'),
        2: ('persistentVolumeSource', 'i', 'core.v1.PersistentVolumeSource'),
        3: ('accessModes', 'r', 'string'), 4: ('claimRef', '', 'core.v1.ObjectReference'),
        5: ('persistentVolumeReclaimPolicy', 'z', 'string'),
        6: ('storageClassName', 'z', 'string'), 7: ('mountOptions', 'r', 'string'),
        8: ('volumeMode', '', 'string'), 9: ('nodeAffinity', '', 'core.v1.VolumeNodeAffinity'),
        10: ('volumeAttributesClassName', '', 'string'),
    },
    'core.v1.PersistentVolumeStatus': {
        1: ('phase', 'z', 'string'), 2: ('message', 'z', 'string'), 3: ('reason', 'z', 'string'),
        4: ('lastPhaseTransitionTime', '', 'meta.v1.Time'),
    },
    'core.v1.PhotonPersistentDiskVolumeSource': {
        1: ('pdID', '', 'string'), 2: ('fsType', 'z', 'string'),
    },
    'core.v1.Pod': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'core.v1.PodSpec'),
        3: ('status', 'z', 'core.v1.PodStatus'),
    },
    'core.v1.PodAffinity': {
        1: ('requiredDuringSchedulingIgnoredDuringExecution', 'r', 'core.v1.PodAffinityTerm'),
        2: ('preferredDuringSchedulingIgnoredDuringExecution', 'r',
            'core.v1.WeightedPodAffinityTerm'),
    },
    'core.v1.PodAffinityTerm': {
        1: ('labelSelector', '', 'meta.v1.LabelSelector'), 2: ('namespaces', 'r', 'string'),
        3: ('topologyKey', '', 'string'), 4: ('namespaceSelector', '', 'meta.v1.LabelSelector'),
        5: ('matchLabelKeys', 'r', 'string'), 6: ('mismatchLabelKeys', 'r', 'string'),
    },
    'core.v1.PodAntiAffinity': {
        1: ('requiredDuringSchedulingIgnoredDuringExecution', 'r', 'core.v1.PodAffinityTerm'),
        2: ('preferredDuringSchedulingIgnoredDuringExecution', 'r',
            'core.v1.WeightedPodAffinityTerm'),
    },
    'core.v1.PodCertificateProjection': {
        1: ('signerName', 'z', 'string'), 2: ('keyType', 'z', 'string'),
        3: ('maxExpirationSeconds', '', 'int32'), 4: ('credentialBundlePath', 'z', 'string'),
        5: ('keyPath', 'z', 'string'), 6: ('certificateChainPath', 'z', 'string'),
        7: ('userAnnotations', 'm', 'string,string'),
    },
    'core.v1.PodCondition': {
        1: ('type', '', 'string'), 7: ('observedGeneration', 'z', 'int64'),
        2: ('status', '', 'string'), 3: ('lastProbeTime', 'z', 'meta.v1.Time'),
        4: ('lastTransitionTime', 'z', 'meta.v1.Time'), 5: ('reason', 'z', 'string'),
        6: ('message', 'z', 'string'),
    },
    'core.v1.PodDNSConfig': {
        1: ('nameservers', 'r', 'string'), 2: ('searches', 'r', 'string'),
        3: ('options', 'r', 'core.v1.PodDNSConfigOption'),
    },
    'core.v1.PodDNSConfigOption': {
        1: ('name', 'z', 'string'), 2: ('value', '', 'string'),
    },
    'core.v1.PodExtendedResourceClaimStatus': {
        1: ('requestMappings', 'r', 'core.v1.ContainerExtendedResourceRequest'),
        2: ('resourceClaimName', '', 'string'),
    },
    'core.v1.PodIP': {
        1: ('ip', '', 'string'),
    },
    'core.v1.PodOS': {
        1: ('name', '', 'string'),
    },
    'core.v1.PodReadinessGate': {
        1: ('conditionType', '', 'string'),
    },
    'core.v1.PodResourceClaim': {
        1: ('name', '', 'string'), 3: ('resourceClaimName', '', 'string'),
        4: ('resourceClaimTemplateName', '', 'string'),
    },
    'core.v1.PodResourceClaimStatus': {
        1: ('name', '', 'string'), 2: ('resourceClaimName', '', 'string'),
    },
    'core.v1.PodSchedulingGate': {
        1: ('name', '', 'string'),
    },
    'core.v1.PodSchedulingGroup': {
        1: ('podGroupName', '', 'string'),
    },
    'core.v1.PodSecurityContext': {
        1: ('seLinuxOptions', '', 'core.v1.SELinuxOptions'),
        8: ('windowsOptions', '', 'core.v1.WindowsSecurityContextOptions'),
        2: ('runAsUser', '', 'int64'), 6: ('runAsGroup', '', 'int64'),
        3: ('runAsNonRoot', '', 'bool'), 4: ('supplementalGroups', 'r', 'int64'),
        12: ('supplementalGroupsPolicy', '', 'string'), 5: ('fsGroup', '', 'int64'),
        7: ('sysctls', 'r', 'core.v1.Sysctl'), 9: ('fsGroupChangePolicy', '', 'string'),
        10: ('seccompProfile', '', 'core.v1.SeccompProfile'),
        11: ('appArmorProfile', '', 'core.v1.AppArmorProfile'),
        13: ('seLinuxChangePolicy', '', 'string'),
    },
    'core.v1.PodSpec': {
        1: ('volumes', 'r', 'core.v1.Volume'), 20: ('initContainers', 'r', 'core.v1.Container'),
        2: ('containers', 'r', 'core.v1.Container'),
        34: ('ephemeralContainers', 'r', 'core.v1.EphemeralContainer'),
        3: ('restartPolicy', 'z', 'string'), 4: ('terminationGracePeriodSeconds', '', 'int64'),
        5: ('activeDeadlineSeconds', '', 'int64'), 6: ('dnsPolicy', 'z', 'string'),
        7: ('nodeSelector', 'm', 'string,string'), 8: ('serviceAccountName', 'z', 'string'),
        9: ('serviceAccount', 'z', 'string'), 21: ('automountServiceAccountToken', '', 'bool'),
        10: ('nodeName', 'z', 'string'), 11: ('hostNetwork', 'z', 'bool'),
        12: ('hostPID', 'z', 'bool'), 13: ('hostIPC', 'z', 'bool'),
        27: ('shareProcessNamespace', '', 'bool'),
        14: ('securityContext', '', 'core.v1.PodSecurityContext'),
        15: ('imagePullSecrets', 'r', 'core.v1.LocalObjectReference'),
        16: ('hostname', 'z', 'string'), 17: ('subdomain', 'z', 'string'),
        18: ('affinity', '', 'core.v1.Affinity'), 19: ('schedulerName', 'z', 'string'),
        22: ('tolerations', 'r', 'core.v1.Toleration'),
        23: ('hostAliases', 'r', 'core.v1.HostAlias'), 24: ('priorityClassName', 'z', 'string'),
        25: ('priority', '', 'int32'), 26: ('dnsConfig', '', 'core.v1.PodDNSConfig'),
        28: ('readinessGates', 'r', 'core.v1.PodReadinessGate'),
        29: ('runtimeClassName', '', 'string'), 30: ('enableServiceLinks', '', 'bool'),
        31: ('preemptionPolicy', '', 'string'),
        32: ('overhead', 'm', 'string,api.resource.Quantity'),
        33: ('topologySpreadConstraints', 'r', 'core.v1.TopologySpreadConstraint'),
        35: ('setHostnameAsFQDN', '', 'bool'), 36: ('os', '', 'core.v1.PodOS'),
        37: ('hostUsers', '', 'bool'), 38: ('schedulingGates', 'r', 'core.v1.PodSchedulingGate'),
        39: ('resourceClaims', 'r', 'core.v1.PodResourceClaim'),
        40: ('resources', '', 'core.v1.ResourceRequirements'),
        41: ('hostnameOverride', '', 'string'),
        43: ('schedulingGroup', '', 'core.v1.PodSchedulingGroup'),
    },
    'core.v1.PodStatus': {
        17: ('observedGeneration', 'z', 'int64'), 1: ('phase', 'z', 'string'),
        2: ('conditions', 'r', 'core.v1.PodCondition'), 3: ('message', 'z', 'string'),
        4: ('reason', 'z', 'string'), 11: ('nominatedNodeName', 'z', 'string'),
        5: ('hostIP', 'z', 'string'), 16: ('hostIPs', 'r', 'core.v1.HostIP'),
        6: ('podIP', 'z', 'string'), 12: ('podIPs', 'r', 'core.v1.PodIP'),
        7: ('startTime', '', 'meta.v1.Time'),
        10: ('initContainerStatuses', 'r', 'core.v1.ContainerStatus'),
        8: ('containerStatuses', 'r', 'core.v1.ContainerStatus'), 9: ('qosClass', 'z', 'string'),
        13: ('ephemeralContainerStatuses', 'r', 'core.v1.ContainerStatus'),
        14: ('resize', 'z', 'string'),
        15: ('resourceClaimStatuses', 'r', 'core.v1.PodResourceClaimStatus'),
        18: ('extendedResourceClaimStatus', '', 'core.v1.PodExtendedResourceClaimStatus'),
        19: ('allocatedResources', 'm', 'string,api.resource.Quantity'),
        20: ('resources', '', 'core.v1.ResourceRequirements'),
        21: ('nodeAllocatableResourceClaimStatuses', 'r',
            'core.v1.NodeAllocatableResourceClaimStatus'),
    },
    'core.v1.PodTemplate': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('template', 'z', 'core.v1.PodTemplateSpec'),
    },
    'core.v1.PodTemplateSpec': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'core.v1.PodSpec'),
    },
    'core.v1.PortStatus': {
        1: ('port', '', 'int32'), 2: ('protocol', '', 'string'), 3: ('error', '', 'string'),
    },
    'core.v1.PortworxVolumeSource': {
        1: ('volumeID', '', 'string'), 2: ('fsType', 'z', 'string'), 3: ('readOnly', 'z', 'bool'),
    },
    'core.v1.PreferredSchedulingTerm': {
        1: ('weight', '', 'int32'), 2: ('preference', '', 'core.v1.NodeSelectorTerm'),
    },
    'core.v1.Probe': {
        1: ('handler', 'i', 'core.v1.ProbeHandler'), 2: ('initialDelaySeconds', 'z', 'int32'),
        3: ('timeoutSeconds', 'z', 'int32'), 4: ('periodSeconds', 'z', 'int32'),
        5: ('successThreshold', 'z', 'int32'), 6: ('failureThreshold', 'z', 'int32'),
        7: ('terminationGracePeriodSeconds', '', 'int64'),
    },
    'core.v1.ProbeHandler': {
        1: ('exec', '', 'core.v1.ExecAction'), 2: ('httpGet', '', 'core.v1.HTTPGetAction'),
        3: ('tcpSocket', '', 'core.v1.TCPSocketAction'), 4: ('grpc', '', 'core.v1.GRPCAction'),
    },
    'core.v1.ProjectedVolumeSource': {
        1: ('sources', 'r', 'core.v1.VolumeProjection'), 2: ('defaultMode', '', 'int32'),
    },
    'core.v1.QuobyteVolumeSource': {
        1: ('registry', '', 'string'), 2: ('volume', '', 'string'), 3: ('readOnly', 'z', 'bool'),
        4: ('user', 'z', 'string'), 5: ('group', 'z', 'string'), 6: ('tenant', 'z', 'string'),
    },
    'core.v1.RBDPersistentVolumeSource': {
        1: ('monitors', 'r', 'string'), 2: ('image', '', 'string'), 3: ('fsType', 'z', 'string'),
        4: ('pool', 'z', 'string'), 5: ('user', 'z', 'string'), 6: ('keyring', 'z', 'string'),
        7: ('secretRef', '', 'core.v1.SecretReference'), 8: ('readOnly', 'z', 'bool'),
    },
    'core.v1.RBDVolumeSource': {
        1: ('monitors', 'r', 'string'), 2: ('image', '', 'string'), 3: ('fsType', 'z', 'string'),
        4: ('pool', 'z', 'string'), 5: ('user', 'z', 'string'), 6: ('keyring', 'z', 'string'),
        7: ('secretRef', '', 'core.v1.LocalObjectReference'), 8: ('readOnly', 'z', 'bool'),
    },
    'core.v1.ReplicationController': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', 'z', 'core.v1.ReplicationControllerSpec'),
        3: ('status', 'z', 'core.v1.ReplicationControllerStatus'),
    },
    'core.v1.ReplicationControllerCondition': {
        1: ('type', '', 'string'), 2: ('status', '', 'string'),
        3: ('lastTransitionTime', 'z', 'meta.v1.Time'), 4: ('reason', 'z', 'string'),
        5: ('message', 'z', 'string'),
    },
    'core.v1.ReplicationControllerSpec': {
        1: ('replicas', '', 'int32'), 4: ('minReadySeconds', 'z', 'int32'),
        2: ('selector', 'm', 'string,string'), 3: ('template', '', 'core.v1.PodTemplateSpec'),
    },
    'core.v1.ReplicationControllerStatus': {
        1: ('replicas', '', 'int32'), 2: ('fullyLabeledReplicas', 'z', 'int32'),
        4: ('readyReplicas', 'z', 'int32'), 5: ('availableReplicas', 'z', 'int32'),
        3: ('observedGeneration', 'z', 'int64'),
        6: ('conditions', 'r', 'core.v1.ReplicationControllerCondition'),
    },
    'core.v1.ResourceClaim': {
        1: ('name', '', 'string'), 2: ('request', 'z', 'string'),
    },
    'core.v1.ResourceFieldSelector': {
        1: ('containerName', 'z', 'string'), 2: ('resource', '', 'string'),
        3: ('divisor', 'z', 'api.resource.Quantity'),
    },
    'core.v1.ResourceHealth': {
        1: ('resourceID', '', 'string'), 2: ('health', 'z', 'string'),
        6: ('message', '', 'string'),
    },
    'core.v1.ResourceQuota': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'core.v1.ResourceQuotaSpec'),
        3: ('status', 'z', 'core.v1.ResourceQuotaStatus'),
    },
    'core.v1.ResourceQuotaSpec': {
        1: ('hard', 'm', 'string,api.resource.Quantity'), 2: ('scopes', 'r', 'string'),
        3: ('scopeSelector', '', 'core.v1.ScopeSelector'),
    },
    'core.v1.ResourceQuotaStatus': {
        1: ('hard', 'm', 'string,api.resource.Quantity'),
        2: ('used', 'm', 'string,api.resource.Quantity'),
    },
    'core.v1.ResourceRequirements': {
        1: ('limits', 'm', 'string,api.resource.Quantity'),
        2: ('requests', 'm', 'string,api.resource.Quantity'),
        3: ('claims', 'r', 'core.v1.ResourceClaim'),
    },
    'core.v1.ResourceStatus': {
        1: ('name', '', 'string'), 2: ('resources', 'r', 'core.v1.ResourceHealth'),
    },
    'core.v1.SELinuxOptions': {
        1: ('user', 'z', 'string'), 2: ('role', 'z', 'string'), 3: ('type', 'z', 'string'),
        4: ('level', 'z', 'string'),
    },
    'core.v1.ScaleIOPersistentVolumeSource': {
        1: ('gateway', '', 'string'), 2: ('system', '', 'string'),
        3: ('secretRef', '', 'core.v1.SecretReference'), 4: ('sslEnabled', 'z', 'bool'),
        5: ('protectionDomain', 'z', 'string'), 6: ('storagePool', 'z', 'string'),
        7: ('storageMode', 'z', 'string'), 8: ('volumeName', 'z', 'string'),
        9: ('fsType', 'z', 'string'), 10: ('readOnly', 'z', 'bool'),
    },
    'core.v1.ScaleIOVolumeSource': {
        1: ('gateway', '', 'string'), 2: ('system', '', 'string'),
        3: ('secretRef', '', 'core.v1.LocalObjectReference'), 4: ('sslEnabled', 'z', 'bool'),
        5: ('protectionDomain', 'z', 'string'), 6: ('storagePool', 'z', 'string'),
        7: ('storageMode', 'z', 'string'), 8: ('volumeName', 'z', 'string'),
        9: ('fsType', 'z', 'string'), 10: ('readOnly', 'z', 'bool'),
    },
    'core.v1.ScopeSelector': {
        1: ('matchExpressions', 'r', 'core.v1.ScopedResourceSelectorRequirement'),
    },
    'core.v1.ScopedResourceSelectorRequirement': {
        1: ('scopeName', '', 'string'), 2: ('operator', '', 'string'),
        3: ('values', 'r', 'string'),
    },
    'core.v1.SeccompProfile': {
        1: ('type', '', 'string'), 2: ('localhostProfile', '', 'string'),
    },
    'core.v1.Secret': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 5: ('immutable', '', 'bool'),
        2: ('data', 'm', 'string,bytes'), 4: ('stringData', 'm', 'string,string'),
        3: ('type', 'z', 'string'),
    },
    'core.v1.SecretEnvSource': {
        1: ('localObjectReference', 'i', 'core.v1.LocalObjectReference'),
        2: ('optional', '', 'bool'),
    },
    'core.v1.SecretKeySelector': {
        1: ('localObjectReference', 'i', 'core.v1.LocalObjectReference'), 2: ('key', '', 'string'),
        3: ('optional', '', 'bool'),
    },
    'core.v1.SecretProjection': {
        1: ('localObjectReference', 'i', 'core.v1.LocalObjectReference'),
        2: ('items', 'r', 'core.v1.KeyToPath'), 4: ('optional', '', 'bool'),
    },
    'core.v1.SecretReference': {
        1: ('name', 'z', 'string'), 2: ('namespace', 'z', 'string'),
    },
    'core.v1.SecretVolumeSource': {
        1: ('secretName', 'z', 'string'), 2: ('items', 'r', 'core.v1.KeyToPath'),
        3: ('defaultMode', '', 'int32'), 4: ('optional', '', 'bool'),
    },
    'core.v1.SecurityContext': {
        1: ('capabilities', '', 'core.v1.Capabilities'), 2: ('privileged', '', 'bool'),
        3: ('seLinuxOptions', '', 'core.v1.SELinuxOptions'),
        10: ('windowsOptions', '', 'core.v1.WindowsSecurityContextOptions'),
        4: ('runAsUser', '', 'int64'), 8: ('runAsGroup', '', 'int64'),
        5: ('runAsNonRoot', '', 'bool'), 6: ('readOnlyRootFilesystem', '', 'bool'),
        7: ('allowPrivilegeEscalation', '', 'bool'), 9: ('procMount', '', 'string'),
        11: ('seccompProfile', '', 'core.v1.SeccompProfile'),
        12: ('appArmorProfile', '', 'core.v1.AppArmorProfile'),
    },
    'core.v1.Service': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'core.v1.ServiceSpec'),
        3: ('status', 'z', 'core.v1.ServiceStatus'),
    },
    'core.v1.ServiceAccount': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('secrets', 'r', 'core.v1.ObjectReference'),
        3: ('imagePullSecrets', 'r', 'core.v1.LocalObjectReference'),
        4: ('automountServiceAccountToken', '', 'bool'),
    },
    'core.v1.ServiceAccountTokenProjection': {
        1: ('audience', 'z', 'string'), 2: ('expirationSeconds', '', 'int64'),
        3: ('path', '', 'string'),
    },
    'core.v1.ServicePort': {
        1: ('name', 'z', 'string'), 2: ('protocol', 'z', 'string'),
        6: ('appProtocol', '', 'string'), 3: ('port', '', 'int32'),
        4: ('targetPort', 'z', 'util.intstr.IntOrString'), 5: ('nodePort', 'z', 'int32'),
    },
    'core.v1.ServiceSpec': {
        1: ('ports', 'r', 'core.v1.ServicePort'), 2: ('selector', 'm', 'string,string'),
        3: ('clusterIP', 'z', 'string'), 18: ('clusterIPs', 'r', 'string'),
        4: ('type', 'z', 'string'), 5: ('externalIPs', 'r', 'string'),
        7: ('sessionAffinity', 'z', 'string'), 8: ('loadBalancerIP', 'z', 'string'),
        9: ('loadBalancerSourceRanges', 'r', 'string'), 10: ('externalName', 'z', 'string'),
        11: ('externalTrafficPolicy', 'z', 'string'), 12: ('healthCheckNodePort', 'z', 'int32'),
        13: ('publishNotReadyAddresses', 'z', 'bool'),
        14: ('sessionAffinityConfig', '', 'core.v1.SessionAffinityConfig'),
        19: ('ipFamilies', 'r', 'string'), 17: ('ipFamilyPolicy', '', 'string'),
        20: ('allocateLoadBalancerNodePorts', '', 'bool'), 21: ('loadBalancerClass', '', 'string'),
        22: ('internalTrafficPolicy', '', 'string'), 23: ('trafficDistribution', '', 'string'),
    },
    'core.v1.ServiceStatus': {
        1: ('loadBalancer', 'z', 'core.v1.LoadBalancerStatus'),
        2: ('conditions', 'r', 'meta.v1.Condition'),
    },
    'core.v1.SessionAffinityConfig': {
        1: ('clientIP', '', 'core.v1.ClientIPConfig'),
    },
    'core.v1.SleepAction': {
        1: ('seconds', '', 'int64'),
    },
    'core.v1.StorageOSPersistentVolumeSource': {
        1: ('volumeName', 'z', 'string'), 2: ('volumeNamespace', 'z', 'string'),
        3: ('fsType', 'z', 'string'), 4: ('readOnly', 'z', 'bool'),
        5: ('secretRef', '', 'core.v1.ObjectReference'),
    },
    'core.v1.StorageOSVolumeSource': {
        1: ('volumeName', 'z', 'string'), 2: ('volumeNamespace', 'z', 'string'),
        3: ('fsType', 'z', 'string'), 4: ('readOnly', 'z', 'bool'),
        5: ('secretRef', '', 'core.v1.LocalObjectReference'),
    },
    'core.v1.Sysctl': {
        1: ('name', '', 'string'), 2: ('value', '', 'string'),
    },
    'core.v1.TCPSocketAction': {
        1: ('port', '', 'util.intstr.IntOrString'), 2: ('host', 'z', 'string'),
    },
    'core.v1.Taint': {
        1: ('key', '', 'string'), 2: ('value', 'z', 'string'), 3: ('effect', '', 'string'),
        4: ('timeAdded', '', 'meta.v1.Time'),
    },
    'core.v1.Toleration': {
        1: ('key', 'z', 'string'), 2: ('operator', 'z', 'string'), 3: ('value', 'z', 'string'),
        4: ('effect', 'z', 'string'), 5: ('tolerationSeconds', '', 'int64'),
    },
    'core.v1.TopologySelectorLabelRequirement': {
        1: ('key', '', 'string'), 2: ('values', 'r', 'string'),
    },
    'core.v1.TopologySelectorTerm': {
        1: ('matchLabelExpressions', 'r', 'core.v1.TopologySelectorLabelRequirement'),
    },
    'core.v1.TopologySpreadConstraint': {
        1: ('maxSkew', '', 'int32'), 2: ('topologyKey', '', 'string'),
        3: ('whenUnsatisfiable', '', 'string'), 4: ('labelSelector', '', 'meta.v1.LabelSelector'),
        5: ('minDomains', '', 'int32'), 6: ('nodeAffinityPolicy', '', 'string'),
        7: ('nodeTaintsPolicy', '', 'string'), 8: ('matchLabelKeys', 'r', 'string'),
    },
    'core.v1.TypedLocalObjectReference': {
        1: ('apiGroup', '', 'string'), 2: ('kind', '', 'string'), 3: ('name', '', 'string'),
    },
    'core.v1.TypedObjectReference': {
        1: ('apiGroup', '', 'string'), 2: ('kind', '', 'string'), 3: ('name', '', 'string'),
        4: ('namespace', '', 'string'),
    },
    'core.v1.Volume': {
        1: ('name', '', 'string'), 2: ('volumeSource', 'i', 'core.v1.VolumeSource'),
    },
    'core.v1.VolumeDevice': {
        1: ('name', '', 'string'), 2: ('devicePath', '', 'string'),
    },
    'core.v1.VolumeMount': {
        1: ('name', '', 'string'), 2: ('readOnly', 'z', 'bool'),
        7: ('recursiveReadOnly', '', 'string'), 3: ('mountPath', '', 'string'),
        4: ('subPath', 'z', 'string'), 5: ('mountPropagation', '', 'string'),
        6: ('subPathExpr', 'z', 'string'),
    },
    'core.v1.VolumeMountStatus': {
        1: ('name', '', 'string'), 2: ('mountPath', '', 'string'), 3: ('readOnly', 'z', 'bool'),
        4: ('recursiveReadOnly', '', 'string'), 5: ('volumeStatus', '', 'core.v1.VolumeStatus'),
    },
    'core.v1.VolumeNodeAffinity': {
        1: ('required', '', 'core.v1.NodeSelector'),
    },
    'core.v1.VolumeProjection': {
        1: ('secret', '', 'core.v1.SecretProjection'),
        2: ('downwardAPI', '', 'core.v1.DownwardAPIProjection'),
        3: ('configMap', '', 'core.v1.ConfigMapProjection'),
        4: ('serviceAccountToken', '', 'core.v1.ServiceAccountTokenProjection'),
        5: ('clusterTrustBundle', '', 'core.v1.ClusterTrustBundleProjection'),
        6: ('podCertificate', '', 'core.v1.PodCertificateProjection'),
    },
    'core.v1.VolumeResourceRequirements': {
        1: ('limits', 'm', 'string,api.resource.Quantity'),
        2: ('requests', 'm', 'string,api.resource.Quantity'),
    },
    'core.v1.VolumeSource': {
        1: ('hostPath', '', 'core.v1.HostPathVolumeSource'),
        2: ('emptyDir', '', 'core.v1.EmptyDirVolumeSource'),
        3: ('gcePersistentDisk', '', 'core.v1.GCEPersistentDiskVolumeSource'),
        4: ('awsElasticBlockStore', '', 'core.v1.AWSElasticBlockStoreVolumeSource'),
        5: ('gitRepo', '', 'core.v1.GitRepoVolumeSource'),
        6: ('secret', '', 'core.v1.SecretVolumeSource'), 7: ('nfs', '', 'core.v1.NFSVolumeSource'),
        8: ('iscsi', '', 'core.v1.ISCSIVolumeSource'),
        9: ('glusterfs', '', 'core.v1.GlusterfsVolumeSource'),
        10: ('persistentVolumeClaim', '', 'core.v1.PersistentVolumeClaimVolumeSource'),
        11: ('rbd', '', 'core.v1.RBDVolumeSource'),
        12: ('flexVolume', '', 'core.v1.FlexVolumeSource'),
        13: ('cinder', '', 'core.v1.CinderVolumeSource'),
        14: ('cephfs', '', 'core.v1.CephFSVolumeSource'),
        15: ('flocker', '', 'core.v1.FlockerVolumeSource'),
        16: ('downwardAPI', '', 'core.v1.DownwardAPIVolumeSource'),
        17: ('fc', '', 'core.v1.FCVolumeSource'),
        18: ('azureFile', '', 'core.v1.AzureFileVolumeSource'),
        19: ('configMap', '', 'core.v1.ConfigMapVolumeSource'),
        20: ('vsphereVolume', '', 'core.v1.VsphereVirtualDiskVolumeSource'),
        21: ('quobyte', '', 'core.v1.QuobyteVolumeSource'),
        22: ('azureDisk', '', 'core.v1.AzureDiskVolumeSource'),
        23: ('photonPersistentDisk', '', 'core.v1.PhotonPersistentDiskVolumeSource'),
        26: ('projected', '', 'core.v1.ProjectedVolumeSource'),
        24: ('portworxVolume', '', 'core.v1.PortworxVolumeSource'),
        25: ('scaleIO', '', 'core.v1.ScaleIOVolumeSource'),
        27: ('storageos', '', 'core.v1.StorageOSVolumeSource'),
        28: ('csi', '', 'core.v1.CSIVolumeSource'),
        29: ('ephemeral', '', 'core.v1.EphemeralVolumeSource'),
        30: ('image', '', 'core.v1.ImageVolumeSource'),
    },
    'core.v1.VolumeStatus': {
        1: ('image', '', 'core.v1.ImageVolumeStatus'),
    },
    'core.v1.VsphereVirtualDiskVolumeSource': {
        1: ('volumePath', '', 'string'), 2: ('fsType', 'z', 'string'),
        3: ('storagePolicyName', 'z', 'string'), 4: ('storagePolicyID', 'z', 'string'),
    },
    'core.v1.WeightedPodAffinityTerm': {
        1: ('weight', '', 'int32'), 2: ('podAffinityTerm', '', 'core.v1.PodAffinityTerm'),
    },
    'core.v1.WindowsSecurityContextOptions': {
        1: ('gmsaCredentialSpecName', '', 'string'), 2: ('gmsaCredentialSpec', '', 'string'),
        3: ('runAsUserName', '', 'string'), 4: ('hostProcess', '', 'bool'),
    },
    'discovery.v1.Endpoint': {
        1: ('addresses', 'r', 'string'), 2: ('conditions', 'z', 'discovery.v1.EndpointConditions'),
        3: ('hostname', '', 'string'), 4: ('targetRef', '', 'core.v1.ObjectReference'),
        5: ('deprecatedTopology', 'm', 'string,string'), 6: ('nodeName', '', 'string'),
        7: ('zone', '', 'string'), 8: ('hints', '', 'discovery.v1.EndpointHints'),
    },
    'discovery.v1.EndpointConditions': {
        1: ('ready', '', 'bool'), 2: ('serving', '', 'bool'), 3: ('terminating', '', 'bool'),
    },
    'discovery.v1.EndpointHints': {
        1: ('forZones', 'r', 'discovery.v1.ForZone'), 2: ('forNodes', 'r', 'discovery.v1.ForNode'),
    },
    'discovery.v1.EndpointPort': {
        1: ('name', '', 'string'), 2: ('protocol', '', 'string'), 3: ('port', '', 'int32'),
        4: ('appProtocol', '', 'string'),
    },
    'discovery.v1.EndpointSlice': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 4: ('addressType', '', 'string'),
        2: ('endpoints', 'r', 'discovery.v1.Endpoint'),
        3: ('ports', 'r', 'discovery.v1.EndpointPort'),
    },
    'discovery.v1.ForNode': {
        1: ('name', '', 'string'),
    },
    'discovery.v1.ForZone': {
        1: ('name', '', 'string'),
    },
    'events.v1.Event': {
        1: ('metadata', '', 'meta.v1.ObjectMeta'), 2: ('eventTime', '', 'meta.v1.MicroTime'),
        3: ('series', '', 'events.v1.EventSeries'), 4: ('reportingController', 'z', 'string'),
        5: ('reportingInstance', 'z', 'string'), 6: ('action', 'z', 'string'),
        7: ('reason', 'z', 'string'), 8: ('regarding', 'z', 'core.v1.ObjectReference'),
        9: ('related', '', 'core.v1.ObjectReference'), 10: ('note', 'z', 'string'),
        11: ('type', 'z', 'string'), 12: ('deprecatedSource', 'z', 'core.v1.EventSource'),
        13: ('deprecatedFirstTimestamp', 'z', 'meta.v1.Time'),
        14: ('deprecatedLastTimestamp', 'z', 'meta.v1.Time'),
        15: ('deprecatedCount', 'z', 'int32'),
    },
    'events.v1.EventSeries': {
        1: ('count', '', 'int32'), 2: ('lastObservedTime', '', 'meta.v1.MicroTime'),
    },
    'meta.v1.Condition': {
        1: ('type', '', 'string'), 2: ('status', '', 'string'),
        3: ('observedGeneration', 'z', 'int64'), 4: ('lastTransitionTime', '', 'meta.v1.Time'),
        5: ('reason', '', 'string'), 6: ('message', '', 'string'),
    },
    'meta.v1.DeleteOptions': {
        1: ('gracePeriodSeconds', '', 'int64'), 2: ('preconditions', '', 'meta.v1.Preconditions'),
        3: ('orphanDependents', '', 'bool'), 4: ('propagationPolicy', '', 'string'),
        5: ('dryRun', 'r', 'string'),
        6: ('ignoreStoreReadErrorWithClusterBreakingPotential', '', 'bool'),
    },
    'meta.v1.FieldSelectorRequirement': {
        1: ('key', '', 'string'), 2: ('operator', '', 'string'), 3: ('values', 'r', 'string'),
    },
    'meta.v1.FieldsV1': {
        1: ('-', '', 'bytes'),
    },
    'meta.v1.LabelSelector': {
        1: ('matchLabels', 'm', 'string,string'),
        2: ('matchExpressions', 'r', 'meta.v1.LabelSelectorRequirement'),
    },
    'meta.v1.LabelSelectorRequirement': {
        1: ('key', '', 'string'), 2: ('operator', '', 'string'), 3: ('values', 'r', 'string'),
    },
    'meta.v1.ManagedFieldsEntry': {
        1: ('manager', 'z', 'string'), 2: ('operation', 'z', 'string'),
        3: ('apiVersion', 'z', 'string'), 4: ('time', '', 'meta.v1.Time'),
        6: ('fieldsType', 'z', 'string'), 7: ('fieldsV1', '', 'meta.v1.FieldsV1'),
        8: ('subresource', 'z', 'string'),
    },
    'meta.v1.MicroTime': {
        1: ('seconds', 'z', 'int64'), 2: ('nanos', 'z', 'int32'),
    },
    'meta.v1.ObjectMeta': {
        1: ('name', 'z', 'string'), 2: ('generateName', 'z', 'string'),
        3: ('namespace', 'z', 'string'), 4: ('selfLink', 'z', 'string'), 5: ('uid', 'z', 'string'),
        6: ('resourceVersion', 'z', 'string'), 7: ('generation', 'z', 'int64'),
        8: ('creationTimestamp', 'z', 'meta.v1.Time'),
        9: ('deletionTimestamp', '', 'meta.v1.Time'),
        10: ('deletionGracePeriodSeconds', '', 'int64'), 11: ('labels', 'm', 'string,string'),
        12: ('annotations', 'm', 'string,string'),
        13: ('ownerReferences', 'r', 'meta.v1.OwnerReference'), 14: ('finalizers', 'r', 'string'),
        17: ('managedFields', 'r', 'meta.v1.ManagedFieldsEntry'),
    },
    'meta.v1.OwnerReference': {
        5: ('apiVersion', '', 'string'), 1: ('kind', '', 'string'), 3: ('name', '', 'string'),
        4: ('uid', '', 'string'), 6: ('controller', '', 'bool'),
        7: ('blockOwnerDeletion', '', 'bool'),
    },
    'meta.v1.Preconditions': {
        1: ('uid', '', 'string'), 2: ('resourceVersion', '', 'string'),
    },
    'meta.v1.Time': {
        1: ('seconds', 'z', 'int64'), 2: ('nanos', 'z', 'int32'),
    },
    'networking.v1.HTTPIngressPath': {
        1: ('path', 'z', 'string'), 3: ('pathType', '', 'string'),
        2: ('backend', '', 'networking.v1.IngressBackend'),
    },
    'networking.v1.HTTPIngressRuleValue': {
        1: ('paths', 'r', 'networking.v1.HTTPIngressPath'),
    },
    'networking.v1.IPBlock': {
        1: ('cidr', '', 'string'), 2: ('except', 'r', 'string'),
    },
    'networking.v1.Ingress': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('spec', 'z', 'networking.v1.IngressSpec'),
        3: ('status', 'z', 'networking.v1.IngressStatus'),
    },
    'networking.v1.IngressBackend': {
        4: ('service', '', 'networking.v1.IngressServiceBackend'),
        3: ('resource', '', 'core.v1.TypedLocalObjectReference'),
    },
    'networking.v1.IngressClass': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', 'z', 'networking.v1.IngressClassSpec'),
    },
    'networking.v1.IngressClassParametersReference': {
        1: ('apiGroup', '', 'string'), 2: ('kind', '', 'string'), 3: ('name', '', 'string'),
        4: ('scope', '', 'string'), 5: ('namespace', '', 'string'),
    },
    'networking.v1.IngressClassSpec': {
        1: ('controller', 'z', 'string'),
        2: ('parameters', '', 'networking.v1.IngressClassParametersReference'),
    },
    'networking.v1.IngressLoadBalancerIngress': {
        1: ('ip', 'z', 'string'), 2: ('hostname', 'z', 'string'),
        4: ('ports', 'r', 'networking.v1.IngressPortStatus'),
    },
    'networking.v1.IngressLoadBalancerStatus': {
        1: ('ingress', 'r', 'networking.v1.IngressLoadBalancerIngress'),
    },
    'networking.v1.IngressPortStatus': {
        1: ('port', '', 'int32'), 2: ('protocol', '', 'string'), 3: ('error', '', 'string'),
    },
    'networking.v1.IngressRule': {
        1: ('host', 'z', 'string'), 2: ('ingressRuleValue', 'i', 'networking.v1.IngressRuleValue'),
    },
    'networking.v1.IngressRuleValue': {
        1: ('http', '', 'networking.v1.HTTPIngressRuleValue'),
    },
    'networking.v1.IngressServiceBackend': {
        1: ('name', '', 'string'), 2: ('port', 'z', 'networking.v1.ServiceBackendPort'),
    },
    'networking.v1.IngressSpec': {
        4: ('ingressClassName', '', 'string'),
        1: ('defaultBackend', '', 'networking.v1.IngressBackend'),
        2: ('tls', 'r', 'networking.v1.IngressTLS'),
        3: ('rules', 'r', 'networking.v1.IngressRule'),
    },
    'networking.v1.IngressStatus': {
        1: ('loadBalancer', 'z', 'networking.v1.IngressLoadBalancerStatus'),
    },
    'networking.v1.IngressTLS': {
        1: ('hosts', 'r', 'string'), 2: ('secretName', 'z', 'string'),
    },
    'networking.v1.NetworkPolicy': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', 'z', 'networking.v1.NetworkPolicySpec'),
    },
    'networking.v1.NetworkPolicyEgressRule': {
        1: ('ports', 'r', 'networking.v1.NetworkPolicyPort'),
        2: ('to', 'r', 'networking.v1.NetworkPolicyPeer'),
    },
    'networking.v1.NetworkPolicyIngressRule': {
        1: ('ports', 'r', 'networking.v1.NetworkPolicyPort'),
        2: ('from', 'r', 'networking.v1.NetworkPolicyPeer'),
    },
    'networking.v1.NetworkPolicyPeer': {
        1: ('podSelector', '', 'meta.v1.LabelSelector'),
        2: ('namespaceSelector', '', 'meta.v1.LabelSelector'),
        3: ('ipBlock', '', 'networking.v1.IPBlock'),
    },
    'networking.v1.NetworkPolicyPort': {
        1: ('protocol', '', 'string'), 2: ('port', '', 'util.intstr.IntOrString'),
        3: ('endPort', '', 'int32'),
    },
    'networking.v1.NetworkPolicySpec': {
        1: ('podSelector', '', 'meta.v1.LabelSelector'),
        2: ('ingress', 'r', 'networking.v1.NetworkPolicyIngressRule'),
        3: ('egress', 'r', 'networking.v1.NetworkPolicyEgressRule'),
        4: ('policyTypes', 'r', 'string'),
    },
    'networking.v1.ServiceBackendPort': {
        1: ('name', 'z', 'string'), 2: ('number', 'z', 'int32'),
    },
    'policy.v1.Eviction': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('deleteOptions', '', 'meta.v1.DeleteOptions'),
    },
    'policy.v1.PodDisruptionBudget': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', 'z', 'policy.v1.PodDisruptionBudgetSpec'),
        3: ('status', 'z', 'policy.v1.PodDisruptionBudgetStatus'),
    },
    'policy.v1.PodDisruptionBudgetSpec': {
        1: ('minAvailable', '', 'util.intstr.IntOrString'),
        2: ('selector', '', 'meta.v1.LabelSelector'),
        3: ('maxUnavailable', '', 'util.intstr.IntOrString'),
        4: ('unhealthyPodEvictionPolicy', '', 'string'),
    },
    'policy.v1.PodDisruptionBudgetStatus': {
        1: ('observedGeneration', 'z', 'int64'), 2: ('disruptedPods', 'm', 'string,meta.v1.Time'),
        3: ('disruptionsAllowed', '', 'int32'), 4: ('currentHealthy', '', 'int32'),
        5: ('desiredHealthy', '', 'int32'), 6: ('expectedPods', '', 'int32'),
        7: ('conditions', 'r', 'meta.v1.Condition'),
    },
    'rbac.v1.AggregationRule': {
        1: ('clusterRoleSelectors', 'r', 'meta.v1.LabelSelector'),
    },
    'rbac.v1.ClusterRole': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('rules', 'r', 'rbac.v1.PolicyRule'),
        3: ('aggregationRule', '', 'rbac.v1.AggregationRule'),
    },
    'rbac.v1.ClusterRoleBinding': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('subjects', 'r', 'rbac.v1.Subject'),
        3: ('roleRef', '', 'rbac.v1.RoleRef'),
    },
    'rbac.v1.PolicyRule': {
        1: ('verbs', 'r', 'string'), 2: ('apiGroups', 'r', 'string'),
        3: ('resources', 'r', 'string'), 4: ('resourceNames', 'r', 'string'),
        5: ('nonResourceURLs', 'r', 'string'),
    },
    'rbac.v1.Role': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('rules', 'r', 'rbac.v1.PolicyRule'),
    },
    'rbac.v1.RoleBinding': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('subjects', 'r', 'rbac.v1.Subject'),
        3: ('roleRef', '', 'rbac.v1.RoleRef'),
    },
    'rbac.v1.RoleRef': {
        1: ('apiGroup', '', 'string'), 2: ('kind', '', 'string'), 3: ('name', '', 'string'),
    },
    'rbac.v1.Subject': {
        1: ('kind', '', 'string'), 2: ('apiGroup', 'z', 'string'), 3: ('name', '', 'string'),
        4: ('namespace', 'z', 'string'),
    },
    'runtime.RawExtension': {
        1: ('-', '', 'bytes'),
    },
    'runtime.TypeMeta': {
        1: ('apiVersion', 'z', 'string'), 2: ('kind', 'z', 'string'),
    },
    'runtime.Unknown': {
        1: ('typeMeta', 'i', 'runtime.TypeMeta'), 2: ('-', '', 'bytes'),
        3: ('contentEncoding', '', 'string'), 4: ('contentType', '', 'string'),
    },
    'scheduling.v1.PriorityClass': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('value', '', 'int32'),
        3: ('globalDefault', 'z', 'bool'), 4: ('description', 'z', 'string'),
        5: ('preemptionPolicy', '', 'string'),
    },
    'storage.v1.StorageClass': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'), 2: ('provisioner', '', 'string'),
        3: ('parameters', 'm', 'string,string'), 4: ('reclaimPolicy', '', 'string'),
        5: ('mountOptions', 'r', 'string'), 6: ('allowVolumeExpansion', '', 'bool'),
        7: ('volumeBindingMode', '', 'string'),
        8: ('allowedTopologies', 'r', 'core.v1.TopologySelectorTerm'),
    },
    'util.intstr.IntOrString': {
        1: ('type', '', 'int64'), 2: ('intVal', '', 'int32'), 3: ('strVal', '', 'string'),
    },
}

APIEXTENSIONS: dict[str, dict[int, tuple[str, str, str]]] = {
    'apiextensions.v1.CustomResourceColumnDefinition': {
        1: ('name', '', 'string'), 2: ('type', '', 'string'), 3: ('format', 'z', 'string'),
        4: ('description', 'z', 'string'), 5: ('priority', 'z', 'int32'),
        6: ('jsonPath', '', 'string'),
    },
    'apiextensions.v1.CustomResourceConversion': {
        1: ('strategy', '', 'string'), 2: ('webhook', '', 'apiextensions.v1.WebhookConversion'),
    },
    'apiextensions.v1.CustomResourceDefinition': {
        1: ('metadata', 'z', 'meta.v1.ObjectMeta'),
        2: ('spec', '', 'apiextensions.v1.CustomResourceDefinitionSpec'),
        3: ('status', 'z', 'apiextensions.v1.CustomResourceDefinitionStatus'),
    },
    'apiextensions.v1.CustomResourceDefinitionCondition': {
        1: ('type', '', 'string'), 2: ('status', '', 'string'),
        3: ('lastTransitionTime', 'z', 'meta.v1.Time'), 4: ('reason', 'z', 'string'),
        5: ('message', 'z', 'string'), 6: ('observedGeneration', 'z', 'int64'),
    },
    'apiextensions.v1.CustomResourceDefinitionNames': {
        1: ('plural', '', 'string'), 2: ('singular', 'z', 'string'),
        3: ('shortNames', 'r', 'string'), 4: ('kind', '', 'string'),
        5: ('listKind', 'z', 'string'), 6: ('categories', 'r', 'string'),
    },
    'apiextensions.v1.CustomResourceDefinitionSpec': {
        1: ('group', '', 'string'),
        3: ('names', '', 'apiextensions.v1.CustomResourceDefinitionNames'),
        4: ('scope', '', 'string'),
        7: ('versions', 'r', 'apiextensions.v1.CustomResourceDefinitionVersion'),
        9: ('conversion', '', 'apiextensions.v1.CustomResourceConversion'),
        10: ('preserveUnknownFields', 'z', 'bool'),
    },
    'apiextensions.v1.CustomResourceDefinitionStatus': {
        1: ('conditions', 'r', 'apiextensions.v1.CustomResourceDefinitionCondition'),
        2: ('acceptedNames', '', 'apiextensions.v1.CustomResourceDefinitionNames'),
        3: ('storedVersions', 'r', 'string'), 4: ('observedGeneration', 'z', 'int64'),
    },
    'apiextensions.v1.CustomResourceDefinitionVersion': {
        1: ('name', '', 'string'), 2: ('served', '', 'bool'), 3: ('storage', '', 'bool'),
        7: ('deprecated', 'z', 'bool'), 8: ('deprecationWarning', '', 'string'),
        4: ('schema', '', 'apiextensions.v1.CustomResourceValidation'),
        5: ('subresources', '', 'apiextensions.v1.CustomResourceSubresources'),
        6: ('additionalPrinterColumns', 'r', 'apiextensions.v1.CustomResourceColumnDefinition'),
        9: ('selectableFields', 'r', 'apiextensions.v1.SelectableField'),
    },
    'apiextensions.v1.CustomResourceSubresourceScale': {
        1: ('specReplicasPath', '', 'string'), 2: ('statusReplicasPath', '', 'string'),
        3: ('labelSelectorPath', '', 'string'),
    },
    'apiextensions.v1.CustomResourceSubresourceStatus': {
    },
    'apiextensions.v1.CustomResourceSubresources': {
        1: ('status', '', 'apiextensions.v1.CustomResourceSubresourceStatus'),
        2: ('scale', '', 'apiextensions.v1.CustomResourceSubresourceScale'),
    },
    'apiextensions.v1.CustomResourceValidation': {
        1: ('openAPIV3Schema', '', 'apiextensions.v1.JSONSchemaProps'),
    },
    'apiextensions.v1.ExternalDocumentation': {
        1: ('description', 'z', 'string'), 2: ('url', 'z', 'string'),
    },
    'apiextensions.v1.JSON': {
        1: ('-', '', 'bytes'),
    },
    'apiextensions.v1.JSONSchemaProps': {
        1: ('id', 'z', 'string'), 2: ('$schema', 'z', 'string'), 3: ('$ref', '', 'string'),
        4: ('description', 'z', 'string'), 5: ('type', 'z', 'string'),
        6: ('format', 'z', 'string'), 7: ('title', 'z', 'string'),
        8: ('default', '', 'apiextensions.v1.JSON'), 9: ('maximum', '', 'double'),
        10: ('exclusiveMaximum', 'z', 'bool'), 11: ('minimum', '', 'double'),
        12: ('exclusiveMinimum', 'z', 'bool'), 13: ('maxLength', '', 'int64'),
        14: ('minLength', '', 'int64'), 15: ('pattern', 'z', 'string'),
        16: ('maxItems', '', 'int64'), 17: ('minItems', '', 'int64'),
        18: ('uniqueItems', 'z', 'bool'), 19: ('multipleOf', '', 'double'),
        20: ('enum', 'r', 'apiextensions.v1.JSON'), 21: ('maxProperties', '', 'int64'),
        22: ('minProperties', '', 'int64'), 23: ('required', 'r', 'string'),
        24: ('items', '', 'apiextensions.v1.JSONSchemaPropsOrArray'),
        25: ('allOf', 'r', 'apiextensions.v1.JSONSchemaProps'),
        26: ('oneOf', 'r', 'apiextensions.v1.JSONSchemaProps'),
        27: ('anyOf', 'r', 'apiextensions.v1.JSONSchemaProps'),
        28: ('not', '', 'apiextensions.v1.JSONSchemaProps'),
        29: ('properties', 'm', 'string,apiextensions.v1.JSONSchemaProps'),
        30: ('additionalProperties', '', 'apiextensions.v1.JSONSchemaPropsOrBool'),
        31: ('patternProperties', 'm', 'string,apiextensions.v1.JSONSchemaProps'),
        32: ('dependencies', 'm', 'string,apiextensions.v1.JSONSchemaPropsOrStringArray'),
        33: ('additionalItems', '', 'apiextensions.v1.JSONSchemaPropsOrBool'),
        34: ('definitions', 'm', 'string,apiextensions.v1.JSONSchemaProps'),
        35: ('externalDocs', '', 'apiextensions.v1.ExternalDocumentation'),
        36: ('example', '', 'apiextensions.v1.JSON'), 37: ('nullable', 'z', 'bool'),
        38: ('x-kubernetes-preserve-unknown-fields', '', 'bool'),
        39: ('x-kubernetes-embedded-resource', 'z', 'bool'),
        40: ('x-kubernetes-int-or-string', 'z', 'bool'),
        41: ('x-kubernetes-list-map-keys', 'r', 'string'),
        42: ('x-kubernetes-list-type', '', 'string'), 43: ('x-kubernetes-map-type', '', 'string'),
        44: ('x-kubernetes-validations', 'r', 'apiextensions.v1.ValidationRule'),
    },
    'apiextensions.v1.JSONSchemaPropsOrArray': {
        1: ('schema', '', 'apiextensions.v1.JSONSchemaProps'),
        2: ('jSONSchemas', 'r', 'apiextensions.v1.JSONSchemaProps'),
    },
    'apiextensions.v1.JSONSchemaPropsOrBool': {
        1: ('allows', '', 'bool'), 2: ('schema', '', 'apiextensions.v1.JSONSchemaProps'),
    },
    'apiextensions.v1.JSONSchemaPropsOrStringArray': {
        1: ('schema', '', 'apiextensions.v1.JSONSchemaProps'), 2: ('property', 'r', 'string'),
    },
    'apiextensions.v1.SelectableField': {
        1: ('jsonPath', '', 'string'),
    },
    'apiextensions.v1.ServiceReference': {
        1: ('namespace', '', 'string'), 2: ('name', '', 'string'), 3: ('path', '', 'string'),
        4: ('port', '', 'int32'),
    },
    'apiextensions.v1.ValidationRule': {
        1: ('rule', '', 'string'), 2: ('message', 'z', 'string'),
        3: ('messageExpression', 'z', 'string'), 4: ('reason', '', 'string'),
        5: ('fieldPath', 'z', 'string'), 6: ('optionalOldSelf', '', 'bool'),
    },
    'apiextensions.v1.WebhookClientConfig': {
        3: ('url', '', 'string'), 1: ('service', '', 'apiextensions.v1.ServiceReference'),
        2: ('caBundle', 'z', 'bytes'),
    },
    'apiextensions.v1.WebhookConversion': {
        2: ('clientConfig', '', 'apiextensions.v1.WebhookClientConfig'),
        3: ('conversionReviewVersions', 'r', 'string'),
    },
}

LISTS: frozenset[str] = frozenset(['authentication.v1.ExtraValue', 'authorization.v1.ExtraValue'])
