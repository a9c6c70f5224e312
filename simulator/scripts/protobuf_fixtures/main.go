// Writes protobuf request bodies (k8s envelope + runtime.Unknown) and the JSON of the same
// objects, as encoded by k8s.io/api's own marshallers: test data for harvester_sim's
// protobuf decoder (simulator/tests/test_api_protobuf.py).
//
//	cd simulator/scripts/protobuf_fixtures && go run . ../../tests/data/protobuf
//
// writes go-<name>.pb (the request body) and go-<name>.json (encoding/json of the object).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type marshaler interface{ Marshal() ([]byte, error) }

func write(dir, name, apiVersion, kind string, obj marshaler, tm *metav1.TypeMeta) {
	raw, err := obj.Marshal()
	if err != nil {
		panic(err)
	}
	unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	body, err := unk.Marshal()
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go-"+name+".pb"), append([]byte("k8s\x00"), body...), 0o644); err != nil {
		panic(err)
	}
	tm.APIVersion, tm.Kind = apiVersion, kind
	js, err := json.MarshalIndent(obj, "", " ")
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go-"+name+".json"), append(js, '\n'), 0o644); err != nil {
		panic(err)
	}
	fmt.Println(name, len(body))
}

func ptr[T any](v T) *T { return &v }

func main() {
	dir := os.Args[1]
	t0 := metav1.NewTime(time.Date(2026, 3, 1, 12, 30, 45, 0, time.UTC))
	mt := metav1.NewMicroTime(time.Date(2026, 3, 1, 12, 30, 45, 123456000, time.UTC))
	meta := metav1.ObjectMeta{
		Name: "web", Namespace: "pbns", GenerateName: "web-",
		Labels:      map[string]string{"app": "web", "tier": "front"},
		Annotations: map[string]string{"note": "ünïcode ✓", "empty": ""},
		Finalizers:  []string{"example.com/guard"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
			Name: "web-1", UID: "0d2f0c0e-1111-2222-3333-444455556666", Controller: ptr(true),
			BlockOwnerDeletion: ptr(false)}},
		CreationTimestamp: t0,
	}
	podSpec := v1.PodSpec{
		Volumes: []v1.Volume{
			{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
				Items:                []v1.KeyToPath{{Key: "a", Path: "a.txt", Mode: ptr(int32(0o400))}},
				DefaultMode:          ptr(int32(0o644)), Optional: ptr(true)}}},
			{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s1"}}},
			{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{
				Medium: v1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("64Mi"))}}},
			{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{
				Path: "/var/lib/x", Type: ptr(v1.HostPathDirectoryOrCreate)}}},
			{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Audience: "vault", ExpirationSeconds: ptr(int64(3600)), Path: "token"}},
					{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
				}}}},
		},
		InitContainers: []v1.Container{{Name: "init", Image: "busybox:1.36", Command: []string{"sh", "-c", "true"}}},
		Containers: []v1.Container{{
			Name: "web", Image: "nginx:1.25", Args: []string{"-g", "daemon off;"}, WorkingDir: "/srv",
			Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: v1.ProtocolTCP}, {ContainerPort: 9090, HostPort: 9090, HostIP: "0.0.0.0"}},
			Env: []v1.EnvVar{
				{Name: "PLAIN", Value: "1"},
				{Name: "EMPTY"},
				{Name: "PASS", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s1"}, Key: "u"}}},
				{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}},
				{Name: "MEM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			},
			EnvFrom: []v1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
			Resources: v1.ResourceRequirements{
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("256Mi")},
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("0.1"), v1.ResourceMemory: resource.MustParse("1G")},
			},
			VolumeMounts: []v1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg", ReadOnly: true, SubPath: "a"}, {Name: "scratch", MountPath: "/tmp"}},
			LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http"), Scheme: v1.URISchemeHTTP,
				HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "1"}}}}, InitialDelaySeconds: 5, PeriodSeconds: 10, FailureThreshold: 3},
			ReadinessProbe:  &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}}, TimeoutSeconds: 2},
			StartupProbe:    &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/ready"}}}, TerminationGracePeriodSeconds: ptr(int64(0))},
			Lifecycle:       &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 5}}},
			ImagePullPolicy: v1.PullIfNotPresent,
			SecurityContext: &v1.SecurityContext{RunAsUser: ptr(int64(1000)), RunAsNonRoot: ptr(true), AllowPrivilegeEscalation: ptr(false),
				Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}, Add: []v1.Capability{"NET_BIND_SERVICE"}}, Privileged: ptr(false)},
			TTY: true,
		}},
		RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr(int64(30)), DNSPolicy: v1.DNSClusterFirst,
		NodeSelector: map[string]string{"kubernetes.io/os": "linux"}, ServiceAccountName: "sa1", AutomountServiceAccountToken: ptr(false),
		HostNetwork:      true,
		SecurityContext:  &v1.PodSecurityContext{FSGroup: ptr(int64(2000)), RunAsGroup: ptr(int64(-1)), SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}},
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "reg"}},
		Affinity: &v1.Affinity{
			NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}}}},
			PodAntiAffinity: &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 100,
				PodAffinityTerm: v1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}}}}}},
		},
		Tolerations: []v1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
			{Key: "dedicated", Value: "web", Effect: v1.TaintEffectNoSchedule, Operator: v1.TolerationOpEqual}},
		PriorityClassName: "high", Priority: ptr(int32(-5)),
		TopologySpreadConstraints: []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
		HostAliases:               []v1.HostAlias{{IP: "10.0.0.1", Hostnames: []string{"a.local"}}},
	}
	dep := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
		Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: podSpec},
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge: ptr(intstr.FromString("25%")), MaxUnavailable: ptr(intstr.FromInt32(0))}},
		RevisionHistoryLimit: ptr(int32(3)), ProgressDeadlineSeconds: ptr(int32(600)),
	}}
	write(dir, "deployment-rich", "apps/v1", "Deployment", dep, &dep.TypeMeta)

	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "pbns"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr(int32(2)), ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "db", Image: "postgres:16"}}}},
		VolumeClaimTemplates: []v1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: ptr("longhorn"),
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("10Gi")}}}}},
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(1)), MaxUnavailable: ptr(intstr.FromString("50%"))}},
	}}
	write(dir, "statefulset", "apps/v1", "StatefulSet", sts, &sts.TypeMeta)

	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "pbns"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
		Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Image: "agent:1"}}, Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}}}},
		UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr(intstr.FromInt32(1)), MaxSurge: ptr(intstr.FromInt32(0))}},
	}}
	write(dir, "daemonset", "apps/v1", "DaemonSet", ds, &ds.TypeMeta)

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "once", Namespace: "pbns"}, Spec: batchv1.JobSpec{
		BackoffLimit: ptr(int32(0)), Completions: ptr(int32(1)), Parallelism: ptr(int32(1)), TTLSecondsAfterFinished: ptr(int32(60)),
		ActiveDeadlineSeconds: ptr(int64(1 << 40)),
		Template:              v1.PodTemplateSpec{Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{Name: "j", Image: "busybox"}}}},
	}}
	write(dir, "job", "batch/v1", "Job", job, &job.TypeMeta)

	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "guard", Namespace: "pbns"}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr(intstr.FromString("50%")), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		UnhealthyPodEvictionPolicy: ptr(policyv1.AlwaysAllow)}}
	write(dir, "pdb", "policy/v1", "PodDisruptionBudget", pdb, &pdb.TypeMeta)

	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "victim", Namespace: "pbns"},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0)), Preconditions: &metav1.Preconditions{UID: ptr(k8stypes.UID("u-1"))}, DryRun: []string{}}}
	write(dir, "eviction", "policy/v1", "Eviction", ev, &ev.TypeMeta)

	plain := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "victim", Namespace: "pbns"},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}}
	write(dir, "eviction-plain", "policy/v1", "Eviction", plain, &plain.TypeMeta)

	lease := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock", Namespace: "pbns"}, Spec: coordv1.LeaseSpec{
		HolderIdentity: ptr("node-1"), LeaseDurationSeconds: ptr(int32(15)), AcquireTime: &mt, RenewTime: &mt, LeaseTransitions: ptr(int32(0))}}
	write(dir, "lease", "coordination.k8s.io/v1", "Lease", lease, &lease.TypeMeta)

	event := &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.1", Namespace: "pbns"},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "pbns", Name: "web", UID: "abc"}, Reason: "Started", Message: "started",
		Source: v1.EventSource{Component: "kubelet", Host: "node-1"}, FirstTimestamp: t0, LastTimestamp: t0, Count: 2, Type: v1.EventTypeNormal,
		EventTime: mt, ReportingController: "kubelet", ReportingInstance: "node-1"}
	write(dir, "event", "v1", "Event", event, &event.TypeMeta)

	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-9", Labels: map[string]string{"node-role.kubernetes.io/control-plane": "true"}},
		Spec: v1.NodeSpec{PodCIDR: "10.52.0.0/24", PodCIDRs: []string{"10.52.0.0/24"}, Unschedulable: true, ProviderID: "harvester://node-9",
			Taints: []v1.Taint{{Key: "node.kubernetes.io/unschedulable", Effect: v1.TaintEffectNoSchedule, TimeAdded: &t0}}},
		Status: v1.NodeStatus{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("16"), v1.ResourcePods: resource.MustParse("110")},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: t0, LastTransitionTime: t0, Reason: "KubeletReady"}},
			Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.9"}},
			NodeInfo:   v1.NodeSystemInfo{KubeletVersion: "v1.33.1+rke2r1", OSImage: "Harvester v1.5.0", Architecture: "amd64"}}}
	write(dir, "node", "v1", "Node", node, &node.TypeMeta)

	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bin", Namespace: "pbns"}, Type: v1.SecretTypeOpaque, Immutable: ptr(false),
		Data: map[string][]byte{"bin": {0, 1, 2, 255, 254}, "empty": {}}, StringData: map[string]string{"plain": "text"}}
	write(dir, "secret-binary", "v1", "Secret", sec, &sec.TypeMeta)

	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "pbns"}, Spec: v1.ServiceSpec{
		Type: v1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"}, SessionAffinity: v1.ServiceAffinityClientIP,
		Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), NodePort: 30080, Protocol: v1.ProtocolTCP},
			{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090), AppProtocol: ptr("http")}},
		IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, IPFamilyPolicy: ptr(v1.IPFamilyPolicySingleStack),
		SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr(int32(10800))}}}}
	write(dir, "service", "v1", "Service", svc, &svc.TypeMeta)

	tr := &authnv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{Name: "sa1", Namespace: "pbns"}, Spec: authnv1.TokenRequestSpec{
		Audiences: []string{"api", "vault"}, ExpirationSeconds: ptr(int64(1200)),
		BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web", UID: "abc"}}}
	write(dir, "tokenrequest", "authentication.k8s.io/v1", "TokenRequest", tr, &tr.TypeMeta)

	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "pbns", ResourceVersion: "1"}, Spec: autoscalingv1.ScaleSpec{Replicas: 4}}
	write(dir, "scale", "autoscaling/v1", "Scale", scale, &scale.TypeMeta)

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "victim", Namespace: "pbns"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: t0}},
			PodIP: "10.52.0.7", StartTime: &t0,
			ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true, RestartCount: 0, Image: "busybox", ImageID: "sha256:1",
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: t0}}}}}}
	write(dir, "pod-status", "v1", "Pod", pod, &pod.TypeMeta)

	rb := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agg"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"/healthz"}}},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"agg": "true"}}}}}
	write(dir, "clusterrole-aggregated", "rbac.authorization.k8s.io/v1", "ClusterRole", rb, &rb.TypeMeta)

	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "pbns"}, Spec: batchv1.CronJobSpec{
		Schedule: "0 3 * * *", TimeZone: ptr("Europe/Berlin"), ConcurrencyPolicy: batchv1.ForbidConcurrent, Suspend: ptr(true),
		SuccessfulJobsHistoryLimit: ptr(int32(1)), JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: v1.PodTemplateSpec{
			Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyOnFailure, Containers: []v1.Container{{Name: "n", Image: "busybox"}}}}}}}}
	write(dir, "cronjob", "batch/v1", "CronJob", cj, &cj.TypeMeta)
}
