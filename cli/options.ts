/**
 * **cli/** owns the command line: every flag, `--help`, the one-line flag
 * errors. It builds `run/`'s {@linkcode RunConfig} from argv. Only `main.ts`
 * imports it; it imports the concerns' parsers and configuration types, never
 * the other way round.
 *
 * The command line: every flag, its default and why it exists, in one table;
 * `parseOptions` turns argv into a typed, validated {@linkcode Options}.
 *
 * @module
 */

import { parseArgs, type ParseArgsOptionsConfig } from "node:util";
import { isDnsLabel, isLabelKey, isLabelValue, UsageError } from "../job.ts";
import { describeFlagError, type FlagSpec, switchValues } from "./flag_errors.ts";
import { type LabelConfig, parseExtraLabels, parseTaintSelectors } from "../nodes/lifecycle.ts";
import type { LogFormat } from "../report/log.ts";
import { failureBudget, parseTopologyLimit } from "../engine/safety.ts";
import { canaryWaves, parseWaves, type WaveSpec } from "../engine/waves.ts";
import type { VerifyConfig } from "../verify/verify.ts";
import { parseMaxUnavailable } from "../maintenance/budget.ts";
import { parseLabelSelector } from "../nodes/label_selector.ts";
import { parseWindow } from "../maintenance/window.ts";
import type { DrainConfig, MaintenanceConfig, PodSelector } from "../maintenance/config.ts";
import type { ReportFormat, ReportTarget, RunConfig } from "../run/config.ts";
import type { GateConfig } from "../gates/config.ts";
import { selectors } from "../gates/promql.ts";

/** Everything the command line says: the run's configuration, `--help` and `--version`. */
export interface Options extends RunConfig {
  /** Print the manual. */
  help: boolean;
  /** Print the version. */
  version: boolean;
}

/** The manual printed by `--help`. */
export const HELP = `job-dispatcher: run exactly one Kubernetes Job per selected node, paced.

MOST USED (in full below; "job-dispatcher help TOPIC" prints one section)
  --job-template PATH       The Job to run on each node (help template).
  --node-selector SEL       Which nodes: a label selector, repeatable (help selection).
  -n, --namespace NS        Namespace of the Jobs (help template).
  --parallelism N           Most Jobs in flight at once, default 100 (help pacing).
  --dry-run=client|server|plan  What the run would do; plan also how long (help plan).
  --owner-job-name NAME     The Job that owns the per-node Jobs (help owner).
  --drain                   Cordon and evict each node's pods before its Job (help drain).
  --max-unavailable N|P%    At most N nodes unavailable at once (help drain).
  --waves SIZES             Roll out in growing waves, e.g. 1,5%,25%,100% (help waves).
  --max-failures N|P%       Stop starting Jobs once more than N nodes failed (help safety).

USAGE
  job-dispatcher --job-template PATH [selection] [flags]
  job-dispatcher status (--name-prefix P | --owner-job-name JOB) [-n NS] [-o wide|json] [-w]
                            a run seen from anywhere, read-only (status --help)
  job-dispatcher fleet -f FLEET.yaml --job-template PATH [flags]
                            one rollout across kubeconfig contexts, in stages (fleet --help)
  job-dispatcher help TOPIC one section of this manual: help gates, help drain, ...
  job-dispatcher completion bash|zsh|fish
                            shell completion: source <(job-dispatcher completion bash)
  job-dispatcher rbac --job-template PATH [flags]
                            the RBAC these flags need, as YAML for kubectl apply (rbac --help)

  Flags as kubectl's: a value follows a space or "="; a switch also takes
  "=true" or "=false".

  Stamps out one batch/v1 Job per node from a template, pins each to its node
  with spec.template.spec.nodeName, keeps at most --parallelism in flight and
  starts the next the moment a watch says one finished. Re-running is safe:
  finished nodes are counted, running Jobs adopted, Jobs of earlier owners or
  another template (annotation <P>/template-hash) replaced once they no longer
  run, new nodes picked up. An API outage fails no node: starts pause and
  resume when the API answers ("API unreachable for 2m10s: paused, ...").

TEMPLATE
  --job-template PATH       One batch/v1 Job in YAML ("-" reads stdin). Output of
                            "kubectl get job -o yaml" works: server fields are dropped.
  --name-prefix P           Job names are "<P>-<node>" (sanitised, with a hash when
                            longer than 63 characters). Default: the template's
                            metadata.name.
  -n, --namespace NS        Namespace of the Jobs. Default: the context's namespace
                            when --kubeconfig or --context is given, else
                            $POD_NAMESPACE, then the in-cluster service account's
                            namespace, then the kubeconfig context's, then "default".

SELECTION
  --nodes a,b,...           Exactly these nodes (each must exist). A deliberate
                            override: taints are not checked.
  --node-selector SEL       Label selector (kubectl syntax); repeatable, the union of
                            the matches is selected. Without --nodes or a selector,
                            every node is selected.
  --node-field-selector SEL Field selector every selected node must also match,
                            e.g. spec.unschedulable=false.
  --node-page-size N        Nodes per LIST page (default 500).
  --ignore-node-taints      Also dispatch to nodes whose NoSchedule/NoExecute taints
                            the template does not tolerate. By default such nodes
                            are skipped, as the DaemonSet controller would, and
                            each skip is logged with its taint.
  --wait-for-nodes-secs S   Wait up to S seconds for the selection to be non-empty
                            and settled (default 0: take it as it is). Waiting
                            declares that nodes are expected: an empty selection
                            then fails.
  --fail-if-no-nodes        An empty selection fails (exit 2) instead of exiting 0
                            with nothing to do: a mistyped --node-selector then
                            fails the pipeline.
  --node-settle-secs S      With waiting, how long the eligible set must stay
                            unchanged (default 15).

PACING AND OWNERSHIP
  --parallelism N           Most Jobs in flight at once (default 100).
  --poll-interval-secs S    LIST interval, used only while the Jobs cannot be
                            watched; a watch is tried again every 30 s
                            (default 5).
  --poll-only               Never watch the Jobs; LIST them every
                            --poll-interval-secs, as polling tools do. For API
                            servers or proxies that break watches, and for
                            comparison: a slot then refills only at a poll. A
                            template's ttlSecondsAfterFinished must then be at
                            least twice --poll-interval-secs.
  --progress-interval-secs S  Progress line interval (default 10).
  --stall-warn-secs S       Report a Job whose pod is still Pending S seconds after
                            it started (unschedulable, image pull back-off, ...),
                            with the pod's own reason, and every 5 minutes after
                            (default 120). Needs "list pods"; without it, said once.
  --owner-job-name NAME     A Job in the namespace that owns the per-node Jobs
                            (ownerReference): deleting it garbage-collects them,
                            and Jobs of an earlier owner are replaced.
  --owner-job-from-pod POD  Use the Job that owns this pod (e.g. $POD_NAME of the
                            dispatcher's own pod) as the owner.
  --tracking-label-prefix P Prefix of the labels <P>/owner, <P>/node and the
                            annotations <P>/node-name, <P>/node-uid,
                            <P>/template-hash (default job-dispatcher).
  --yield-to-live-run       With an owner: if this prefix's Jobs belong to another
                            owner Job that still exists and has not finished,
                            exit 0 without dispatching, naming that run.

API CLIENT
  --kube-api-concurrency N  Most API requests in flight at once (default 16).
                            Watches are not counted: they stay open. Retries wait
                            outside this bound. HTTP/1.1 connections are kept
                            alive and reused, so this also bounds the connections.
  --kube-api-qps Q          Client-side token bucket: Q requests a second (default
  --kube-api-burst B        50), up to B at once after a quiet spell (default
                            300); --kube-api-qps 0 turns it off. client-go's
                            5/10 would hold --parallelism 100 (about 3 requests
                            per node) to under 2 nodes a second; 50/300 are
                            kubectl's discovery limits and let one whole wave of
                            100 nodes start at once. The API server's Priority
                            and Fairness remains the real protection. A 429's
                            Retry-After is waited out plus up to 1 s or 25 %.
  --api-wait-secs S         How long to retry while the API server has not yet
                            answered (a server still starting, a wrong address),
                            default 90; the first failure says at once which
                            address does not answer and until when it is tried.
                            0 fails at once, as kubectl does. Once the server
                            has answered, an outage pauses starts instead.

ROLLOUT SAFETY
  --max-failures N|P%       Failure budget: once more than N nodes (or P% of the
                            run's nodes) failed, create no new Job, let the ones in
                            flight finish, exit 1 naming the nodes never started.
                            A node still blocked at --blocked-timeout-secs counts.
                            0 stops at the first failure. Default: no budget.
  --waves SIZES             Progressive delivery: cumulative wave sizes of the
                            selection, each a count or a percentage (rounded
                            down, at least 1), strictly growing; 100% is added
                            when missing, e.g. 1,5%,25%,100%. A wave starts only
                            when every node of the one before has ended and its
                            soak has passed; each wave at most --parallelism and
                            --max-unavailable at once. A failed node counts
                            against --max-failures; without a budget the first
                            failure stops the next wave. A node that got no Job
                            (still blocked, failed before its Job) or whose
                            outcome is unknown always stops it. The report names
                            each node's wave.
  --wave-soak-secs S        After each wave (not the last), hold S seconds before
                            the next one starts (default 0), counted from the
                            end of its last node: a re-run counts it from the
                            last Job's completionTime and soaks only what is
                            left. With health gates, a break inside the soak
                            (breach, outage, no data, a pause) restarts it,
                            whole.
  --canary N                --waves N,100%: run the first N nodes first (at most
                            min(N, --parallelism) at once); go on only if all
                            succeed (or, with --max-failures, their Jobs' failures
                            within the budget; a canary that got no Job stops).
  --max-per-topology KEY=M  At most M Jobs in flight per value of node label KEY
                            (e.g. topology.kubernetes.io/zone=1), on top of
                            --parallelism. Nodes without the label form one
                            domain. Nodes are interleaved over the domains.
  --node-timeout-secs S     A node whose Job has not finished S seconds after it
                            started fails with reason timeout and frees its slot.
                            With a 4xx that cannot heal, the only way a node
                            fails without its Job failing: outages only pause.
                            Also bounds a post-success write (labels, uncordon)
                            refused with 5xx/429 while the run's other writes go
                            through (a node webhook down): the node then fails
                            with the error.
  --delete-timed-out        With --node-timeout-secs: delete the timed-out Job
                            (foreground) instead of leaving it running.
  --pin nodeName|affinity   nodeName (default) bypasses the scheduler. affinity
                            pins with a required node affinity on metadata.name
                            (and the DaemonSet tolerations), so the scheduler
                            checks resources: a full node leaves the pod Pending
                            instead of failing it OutOfcpu.
  --order name|random|zone-interleaved
                            Dispatch order (default name). zone-interleaved takes
                            turns over topology.kubernetes.io/zone values.
  --seed N                  Seed of --order random (default 0): same seed, same order.

NODE VERIFICATION (after a node's Job succeeded and, where asked, it is Ready again;
before it is labelled, uncordoned and counted)
  --verify-pod-selector SEL The pods on the node this label selector matches (in any
                            namespace, e.g. a validator DaemonSet's) must be Ready,
                            with a Ready transition after the Job finished: a pod
                            Ready since before proves nothing. RBAC: list pods.
  --verify-job-template PATH  One more node-pinned Job (a smoke test, named
                            <prefix>-verify-<node>) must succeed. Its verdict is
                            kept on the node (<P>/verified-job.<job>): a re-run never
                            runs it twice for one success of the node's Job.
  --verify-timeout-secs S   How long the verification may take (default 600). Else
                            the node fails with "verification: pod NS/NAME not Ready
                            after S s" (or naming the Job), stays cordoned as failed
                            nodes do, and counts against --max-failures. An API
                            outage meanwhile pauses; it fails no node.

NODE LIFECYCLE (the dispatcher writes the nodes, so the per-node Jobs need no token)
  --node-label-key KEY      The node label this run owns. Needed by the flags below
                            that write or read it.
  --node-label VALUE        Set KEY=VALUE on a node once its Job succeeded, the node
                            is Ready again and serves a required handler. Written
                            until it sticks (read back, written again if dropped).
  --wait-node-ready-secs S  How long to wait for Ready after the Job succeeded
                            (default 300; 0: do not wait). Not Ready in time: the
                            node fails, unlabelled.
  --require-node-handlers a,b  Label only a node whose .status.runtimeHandlers
                            names one of these (a node reporting none passes:
                            older kubelets do not report them).
  --extra-node-label k=v    Also written with VALUE and removed with KEY;
                            repeatable. Keys must differ from each other and KEY.
  --claim-node-pending      Set KEY to the pending value before the node's Job, so a
                            cleanup finds nodes a crashed run touched. A claim that
                            cannot be written fails the node; no Job is made.
  --node-label-pending-value V  The pending value (default "false").
  --remove-node-label       A cleanup run: demote KEY to the pending value before each
                            Job (not while another instance is finished there),
                            remove it (with the extra labels and the outcome marks)
                            only after the Job succeeded.
  --instance-label-prefix P --multi-install-suffix S
                            Several instances share KEY; each also marks P/S. A
                            cleanup removes KEY only when no other P/* mark is
                            left, demotes it when the others only claimed.
  --remove-node-taints key[:effect],...  With --node-label: lift these taints
                            after the label is on the node, never before.
  --skip-satisfied-nodes    Leave out nodes whose KEY (and P/S mark) already holds
                            VALUE and serve a required handler; a node at the
                            pending value is never left out.
  --cleanup-job-template PATH  Before dispatching, run this template (with the
                            --remove-node-label steps) on the nodes that carry
                            this instance's label but no longer match the
                            selection. Its metadata.name must differ.
  --require-node-runtime-version  Fail a node that reports no
                            status.nodeInfo.containerRuntimeVersion, with no Job.
  --require-node-machine-id Fail a node that reports no status.nodeInfo.machineID.
  --kubelet-timeout-warn-secs S  Warn when a node's kubelet runtimeRequestTimeout
                            (read through nodes/proxy configz) is below S.
  Every node write tests the node UID that was selected: a node replaced under
  the same name is a refused write, and its entry fails.

NODE MAINTENANCE (in the style of kubectl drain)
  --cordon                  Before a node's Job, cordon it (spec.unschedulable,
                            recording <P>/cordoned-by); after its Job succeeded
                            (and, with --node-label, the node is Ready), uncordon
                            it: only a node this run cordoned. A node someone
                            else cordoned stays cordoned. A failed node stays
                            cordoned; the reason is in its <P>/error annotation.
  --uncordon-on-failure     Also uncordon (this run's cordon of) a failed node.
  --drain                   Implies --cordon; then evict the node's pods through
                            the Eviction API (PodDisruptionBudgets honoured) and
                            wait until they are gone, before its Job. DaemonSet
                            and mirror pods stay; the Job still lands (nodeName;
                            --pin affinity tolerates unschedulable).
  --delete-emptydir-data    Also evict pods with emptyDir volumes (data lost).
  --force                   Also evict pods that declare no controller.
  --pod-selector SEL        Only evict the pods this label selector matches.
  --grace-period S          Seconds each pod gets to terminate (default: its own).
  --drain-timeout-secs S    A budget's refusal (429) is retried until S (default
                            600); then the node fails naming the budget and the
                            pods still there. An API outage during a drain
                            pauses the run, and fails no node.
  --disable-eviction        Delete the pods instead: budgets are bypassed.
  --max-unavailable N|P%    Start a node only while fewer than N (or P% of the
                            selection, rounded down, at least 1) of the selected
                            nodes are unavailable: NotReady, cordoned by anyone,
                            or worked on by this run. With --parallelism the
                            smaller bound wins. Said in the progress line. Needs
                            a watched selection (not --nodes).
  --window SPEC             "DAYS HH:MM-HH:MM [ZONE]", e.g. "Mon-Fri 02:00-04:00
                            Europe/Berlin" (repeatable; IANA zones, default UTC;
                            DAYS: Mon, Mon-Fri, Sat,Sun or *; an end at or before
                            the start is the next day). No Job starts outside a
                            window; Jobs in flight finish. When the window closes
                            with nodes left, or the run begins outside every
                            window, it exits 4 naming how many are left; a
                            re-run resumes.
  --blocking-pod-selector SEL  A node running a pod this label selector matches
                            (kubectl syntax; repeatable: any of them) gets no Job:
                            it goes back to the queue without holding a slot and
                            is checked again every 5 s.
  --blocked-timeout-secs S  A node still blocked S seconds after it was first
                            found blocked ends as "blocked", naming the pods (exit
                            1). Default: it waits as long as the run.
  --pause-file PATH         While PATH exists, no new Job starts (Jobs in flight
                            finish); removing it resumes. With an owner Job, the
                            annotation <P>/paused=true on it does the same:
                            "kubectl annotate job OWNER -n NS <P>/paused=true
                            --overwrite"; "kubectl annotate job OWNER -n NS
                            <P>/paused-" resumes.
  --retry-failed            On a re-run of the same owner (or prefix), dispatch
                            again the nodes whose Job failed before: the failed
                            Job is deleted and replaced. Without it a failure is
                            counted, as any finished Job.
  --post-node-delay-secs S  A node whose Job succeeded holds its slot S seconds
                            more (after its uncordon and node lifecycle work),
                            for the cluster to settle before the next starts.

HEALTH GATES
  Prometheus watches the fleet while it rolls: checked before every Job start
  (on a result at most --gate-interval-secs old), a breach stops the line and
  keeps it stopped until a person says go on. Every query is evaluated once
  before the first Job: a query Prometheus rejects (400, 422) or a selector
  that matches no series exits 2, a Prometheus that does not answer exits 3,
  nothing created either way. Mid-run, a Prometheus that does not answer is
  an outage and a selector gone dark is no data, neither a breach: starts
  pause, say so, and resume by themselves; a query Prometheus rejects stops
  the line as a breach does. A latch that cannot be written (the pause
  refused by RBAC or a policy) ends the run with exit 5.
  --gate-prometheus-url URL  Prometheus's base URL (http://prometheus:9090), or
                            the API server's service proxy to it
                            (https://API/api/v1/namespaces/NS/services/NAME:9090/proxy),
                            reached with the kubeconfig's credentials.
  --gate-query EXPR         An instant query (repeatable): breached while it
                            returns a non-empty vector, as an alerting rule
                            fires, e.g. 'sum(kube_deployment_status_replicas_unavailable) > 0'.
  --gate-alerts REGEX       Breached while an alert whose name matches REGEX
                            (anchored, as in PromQL) is firing (/api/v1/alerts);
                            a REGEX that names no alerting rule is refused (exit 2).
  --gate-allow-empty X      May match no series (repeatable): X is a --gate-query
                            as given (all its selectors), one selector as the
                            refusal names it, or the --gate-alerts REGEX. Every
                            other selector must match data: before the first Job
                            one that matches none exits 2; mid-run one that goes
                            dark (or a partial answer with warnings) is no data:
                            starts pause and resume when it is back. absent()
                            and ALERTS selectors are not checked for data, but
                            an ALERTS alertname must name an alerting rule.
  --gate-interval-secs S    Prometheus is asked every S/2 seconds; a Job starts
                            only on an answer at most S seconds old (default 30).
  --gate-bearer-token-file PATH  Sent as "Authorization: Bearer"; read again
                            before every request, so a rotated token is used.
  --gate-ca-file PATH       PEM CAs that sign Prometheus's certificate.
  --on-gate-breach pause|exit  pause (default): no new Job starts, Jobs in flight
                            finish, and the run pauses itself as a person would:
                            <P>/paused=true on the owner Job (the breach in
                            <P>/paused-reason, and an Event GateBreached), or it
                            creates the --pause-file; it stays paused after the
                            metric recovers, until that pause is lifted. Needs an
                            owner Job or --pause-file. exit: the run ends once the
                            Jobs in flight finished, with exit 5, and leaves the
                            ConfigMap <prefix>-gate-breach; the next run with
                            gates refuses to start (exit 5) while it exists, and
                            names the "kubectl delete configmap" that clears it.

CLUSTER ACCESS
  --kubeconfig PATH         Kubeconfig file (default $KUBECONFIG, ~/.kube/config,
                            then the in-cluster service account).
  --context NAME            Kubeconfig context (default: the current context).

OUTPUT
  --dry-run=client|server|plan  client: print the Jobs as a YAML stream, create
                            nothing. server: send every Job with dryRun=All so the
                            API server validates it, create nothing. Either way no
                            node is cordoned, drained, labelled or marked.
                            plan: print what the run would do and do none of it:
                            the nodes in dispatch order grouped by wave (--waves,
                            --canary), each with what the run does with the Job its
                            node has now (start one; adopt a running one; count one
                            that succeeded or failed; retry a failure with
                            --retry-failed; replace a stale one), each skipped node
                            with its reason (a taint, already done), the
                            --max-unavailable budget now, the
                            --window open now or its next opening, and with
                            --drain each node's pods to evict by the drain's own
                            rules (DaemonSet and mirror pods stay, ...) and the
                            PodDisruptionBudgets that refuse now: each eviction is
                            sent with dryRun=All, which the API server judges as a
                            real one (a budget's 429 naming it) and stores nothing,
                            as kubectl drain --dry-run=server does (a 429 of
                            throttling, no budget's, is said not judged). Only a node
                            that would get a new Job is drained. Permissions are
                            checked as the run checks them: one missing, exit 3;
                            a health gate is opened as the run opens it (its
                            exit latch: exit 5), each query measured once.
                            A budget no eviction ever passes (maxUnavailable 0,
                            minAvailable >= its pods; read where the user may get
                            it) is said blocked for good: exit 1. A refused node
                            adds the drain timeout to the --estimate-from estimate.
                            Reads only: no Job, cordon, label, Event, record or
                            --report.
  -o, --output text|json    How --dry-run=plan prints: text (default, a kubectl-like
                            view) or json, one object: waves[].nodes[] {order,
                            node, job, wave, action, domain (with
                            --max-per-topology), drain}, skipped[] {node, reason},
                            budget, window, counts, estimate {from, sampledNodes,
                            nodeMedianSeconds, concurrency (the most at once in
                            any wave), maxPerTopology {key, max} or null,
                            drainWaits {nodes, timeoutSecs} or null, seconds,
                            text}.
  --estimate-from REPORT    An earlier run's JSON report (--report): the median of
                            its nodes' end - start is one node's time T. Each wave
                            takes ceil(size / C) rounds of T + --post-node-delay-secs
                            (size: its nodes but those whose Job already ended; C:
                            --parallelism, or fewer where --max-unavailable has
                            less room now). With --max-per-topology KEY=M, C is
                            at most M times the domains among the wave's nodes,
                            and the rounds are those of the run's own rule: each
                            slot takes the next node whose domain has fewer than
                            M running (nodes without KEY are one domain). Every
                            wave but the last is followed by --wave-soak-secs,
                            unless its nodes' Jobs had all ended already.
                            Not counted: time outside a --window, gate holds,
                            budgets that refuse. The plan shows it; a run logs it
                            after its "selected" line, so the command that was
                            planned runs unchanged. Not a report: exit 2, before
                            the cluster is asked.
  --log-format text|json    Lines on stderr as text (default) or JSON.
  --report PATH             Write what happened to every node to PATH when the run
                            ends: name, UID, Job, start, end, outcome, reason,
                            attempts, wave; each wave and its soak; each gate
                            breach (time, query, value, its latch set and lifted);
                            the pauses. Repeatable, each FORMAT=PATH (a bare PATH
                            takes --report-format): --report json=r.json
                            --report html=r.html writes both from one run.
  --report-format json|junit|html  json (default), JUnit XML with one test case
                            per node for CI systems (a testsuite per wave, the
                            wave in the classname), or html: one self-contained
                            page, a row per node with its drain, Job and
                            verification as bars, pauses, soaks and breaches
                            shaded, reasons on hover.
  --metrics-addr HOST:PORT  Serve Prometheus metrics on http://HOST:PORT/metrics while
                            the run lives (job_dispatcher_nodes{phase},
                            _jobs_created_total, _node_duration_seconds, _paused,
                            _gate_breaches_total, _api_requests_total{code}) and
                            /healthz. ":9090" listens on every address, IPv4 and IPv6.
  --metrics-linger-secs S   After the run, keep /metrics up with the final state
                            for S s, its whole time, whoever scraped meanwhile:
                            each replica of an HA Prometheus pair scrapes on its
                            own (default 0: close at once; the last scrape may
                            then precede the end). Set it above the scrape
                            interval; the log says how many scrapes from how
                            many addresses read it. SIGTERM meanwhile ends the
                            wait; the exit code stays the run's.

  Besides the log and the report, the run is recorded in the cluster, best
  effort (a refused write is said once): Events on each Node (in "default":
  JobSucceeded, JobFailed, NodeFailed when it failed before its Job existed,
  JobPending; kubectl describe node NODE), the label <P>/result and annotations
  <P>/error, <P>/finished-at on each Node, and with an owner, Events and the
  annotation <P>/progress on the owner Job (kubectl describe job OWNER).
  --node-records all|failures|none  Which outcomes go on the nodes: all (default),
                            failures (JobFailed/NodeFailed/JobPending Events and
                            failed marks only: one request per healthy node, for
                            large fleets; an earlier failure mark stays until a
                            run that records all), or none.
  -h, --help                This manual.
  --version                 Version, Deno version and commit.

EXIT CODES
  0    every selected node succeeded (or its outcome is unknown: its Job was
       collected before it was seen, said in the summary), or nothing to do
  1    some node failed (the summary names each, with what to look at);
       with --dry-run=plan, a budget would block a node for good
  2    bad usage or input (flags, template, selectors); nothing was created;
       with --fail-if-no-nodes, no node matched
  3    the cluster could not be used before any dispatch (unreachable,
       unauthorised, forbidden, kubeconfig unusable)
  4    incomplete: the --window closed (or none was open) with nodes left;
       a re-run inside a window resumes them (a failure says 1 instead)
  5    stopped by a health gate (--on-gate-breach exit), or a gate's latch
       from an earlier run is still set (a failed node says 1 instead)
  130  interrupted by SIGINT; 143 by SIGTERM. Jobs already created run on; a
       re-run adopts them and finishes the rest. (A signal after the run ended,
       during --metrics-linger-secs, keeps the run's exit code.)
`;

/** The maintenance flags (cordon, drain, budget, windows, pause), in parseArgs form: part of {@linkcode FLAGS}. */
export const MAINTENANCE_FLAGS = {
  cordon: { type: "boolean" },
  "uncordon-on-failure": { type: "boolean" },
  drain: { type: "boolean" },
  "delete-emptydir-data": { type: "boolean" },
  force: { type: "boolean" },
  "pod-selector": { type: "string" },
  "grace-period": { type: "string" },
  "drain-timeout-secs": { type: "string" },
  "disable-eviction": { type: "boolean" },
  "retry-failed": { type: "boolean" },
  "post-node-delay-secs": { type: "string" },
  "max-unavailable": { type: "string" },
  window: { type: "string", multiple: true },
  "pause-file": { type: "string" },
  "blocking-pod-selector": { type: "string", multiple: true },
  "blocked-timeout-secs": { type: "string" },
} as const;

/** The health gate flags, in parseArgs form: part of {@linkcode FLAGS}. */
export const GATE_FLAGS = {
  "gate-prometheus-url": { type: "string" },
  "gate-query": { type: "string", multiple: true },
  "gate-alerts": { type: "string" },
  "gate-allow-empty": { type: "string", multiple: true },
  "gate-interval-secs": { type: "string" },
  "gate-bearer-token-file": { type: "string" },
  "gate-ca-file": { type: "string" },
  "on-gate-breach": { type: "string" },
} as const;

/** Every flag of a run, in parseArgs form: what `--help` documents, no more and no less. */
export const FLAGS = {
  "job-template": { type: "string" },
  "name-prefix": { type: "string" },
  namespace: { type: "string", short: "n" },
  nodes: { type: "string" },
  "node-selector": { type: "string", multiple: true },
  "node-field-selector": { type: "string" },
  "node-page-size": { type: "string" },
  "ignore-node-taints": { type: "boolean" },
  "wait-for-nodes-secs": { type: "string" },
  "fail-if-no-nodes": { type: "boolean" },
  "node-settle-secs": { type: "string" },
  parallelism: { type: "string" },
  "poll-interval-secs": { type: "string" },
  "poll-only": { type: "boolean" },
  "progress-interval-secs": { type: "string" },
  "kube-api-concurrency": { type: "string" },
  "kube-api-qps": { type: "string" },
  "kube-api-burst": { type: "string" },
  "api-wait-secs": { type: "string" },
  "owner-job-name": { type: "string" },
  "owner-job-from-pod": { type: "string" },
  "tracking-label-prefix": { type: "string" },
  "yield-to-live-run": { type: "boolean" },
  kubeconfig: { type: "string" },
  context: { type: "string" },
  "dry-run": { type: "string" },
  // The plan before the run (--dry-run=plan): how it prints, and the report it estimates from.
  output: { type: "string", short: "o" },
  "estimate-from": { type: "string" },
  "log-format": { type: "string" },
  report: { type: "string", multiple: true },
  "report-format": { type: "string" },
  "metrics-addr": { type: "string" },
  "metrics-linger-secs": { type: "string" },
  "node-records": { type: "string" },
  "max-failures": { type: "string" },
  canary: { type: "string" },
  waves: { type: "string" },
  "wave-soak-secs": { type: "string" },
  "verify-pod-selector": { type: "string" },
  "verify-job-template": { type: "string" },
  "verify-timeout-secs": { type: "string" },
  "max-per-topology": { type: "string" },
  "node-timeout-secs": { type: "string" },
  "delete-timed-out": { type: "boolean" },
  pin: { type: "string" },
  order: { type: "string" },
  seed: { type: "string" },
  "stall-warn-secs": { type: "string" },
  help: { type: "boolean", short: "h" },
  version: { type: "boolean" },
  "node-label-key": { type: "string" },
  "node-label": { type: "string" },
  "wait-node-ready-secs": { type: "string" },
  "require-node-handlers": { type: "string" },
  "extra-node-label": { type: "string", multiple: true },
  "claim-node-pending": { type: "boolean" },
  "node-label-pending-value": { type: "string" },
  "remove-node-label": { type: "boolean" },
  "instance-label-prefix": { type: "string" },
  "multi-install-suffix": { type: "string" },
  "remove-node-taints": { type: "string" },
  "kubelet-timeout-warn-secs": { type: "string" },
  "skip-satisfied-nodes": { type: "boolean" },
  "cleanup-job-template": { type: "string" },
  "require-node-runtime-version": { type: "boolean" },
  "require-node-machine-id": { type: "boolean" },
  ...MAINTENANCE_FLAGS,
  ...GATE_FLAGS,
} as const;

function number(
  flag: string,
  raw: string | undefined,
  fallback: number,
  min: number,
  integer = true,
): number {
  if (raw === undefined) return fallback;
  const shape = integer ? /^[-+]?\d+$/ : /^[-+]?(\d+(\.\d*)?|\.\d+)$/;
  if (!shape.test(raw.trim())) {
    const what = integer
      ? "a whole number"
      : flag.endsWith("-secs")
      ? "a number of seconds"
      : "a number";
    throw new UsageError(`Invalid --${flag} ${JSON.stringify(raw)}: expected ${what}`);
  }
  const value = Number(raw);
  if (value < min) throw new UsageError(`Invalid --${flag} ${raw}: it must be at least ${min}`);
  return value;
}

/** The report formats, as `--report-format` and `--report FORMAT=PATH` name them. */
const REPORT_FORMATS: ReportFormat[] = ["json", "junit", "html"];

/**
 * The reports of `--report` (repeatable): `FORMAT=PATH` names its format; a
 * bare `PATH` takes `--report-format` (default json), as a single `--report`
 * always did. Several let one run write the JSON that `--estimate-from`
 * reads and the HTML a person reads. The first stays `report`/`reportFormat`.
 *
 * @throws {UsageError} when two reports name one path (the second would overwrite the first)
 */
function reportOptions(
  v: Values,
): Pick<RunConfig, "report" | "reportFormat" | "reports"> {
  const fallback = oneOf("report-format", v["report-format"], REPORT_FORMATS) ?? "json";
  const reports: ReportTarget[] = [];
  for (const raw of v.report ?? []) {
    const target = reportTarget(raw, fallback);
    const same = (path: string) => path.replace(/^(\.\/)+/, "");
    if (reports.some((r) => same(r.path) === same(target.path))) {
      throw new UsageError(
        `Invalid --report ${raw}: ${target.path} is already a --report; give each report its own path`,
      );
    }
    reports.push(target);
  }
  if (!reports.length) return { report: undefined, reportFormat: fallback, reports: undefined };
  return { report: reports[0].path, reportFormat: reports[0].format, reports };
}

/**
 * One `--report`: `FORMAT=PATH`, or a bare `PATH` in the `fallback` format.
 * A word before the first `=` (no `/` in it) is read as a format: a
 * mistyped one (`xml=a`, `HTML=a`) is refused rather than written as JSON
 * to a file named `xml=a`; `./xml=a` names such a file.
 *
 * @throws {UsageError} naming the bad format or the missing path
 */
function reportTarget(raw: string, fallback: ReportFormat): ReportTarget {
  const m = raw.match(/^([^/=]*)=(.*)$/);
  if (!m) return { path: raw, format: fallback };
  const [, format, path] = m;
  const forms = "write json=, junit= or html= before the path";
  if (!format) throw new UsageError(`Invalid --report ${raw}: no format before =: ${forms}`);
  if (!REPORT_FORMATS.includes(format as ReportFormat)) {
    throw new UsageError(
      `Invalid --report ${raw}: ${format} is no report format: ${forms}, or ./${raw} for a file of that name`,
    );
  }
  if (!path) throw new UsageError(`Invalid --report ${raw}: it names no path after ${format}=`);
  return { path, format: format as ReportFormat };
}

function oneOf<T extends string>(
  flag: string,
  raw: string | undefined,
  allowed: T[],
): T | undefined {
  if (raw === undefined) return undefined;
  if (!allowed.includes(raw as T)) {
    throw new UsageError(
      `Invalid --${flag} ${JSON.stringify(raw)}: expected ${allowed.join(" or ")}`,
    );
  }
  return raw as T;
}

/** `--metrics-addr HOST:PORT`, checked: a port of 1–65535, a host or none (every address). */
function metricsAddr(text: string): string {
  const m = text.match(/^(\[[0-9a-fA-F:.]+\]|[^:\s]*):(\d{1,5})$/);
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) {
    throw new UsageError(
      `Invalid --metrics-addr ${JSON.stringify(text)}: write HOST:PORT, e.g. 0.0.0.0:9090 or :9090`,
    );
  }
  return text;
}

/**
 * parseArgs, strict, with its refusals as one-line UsageErrors.
 *
 * @throws {UsageError} for an unknown flag, a missing value or a positional argument
 */
function parseFlags<F extends ParseArgsOptionsConfig>(argv: string[], flags: F) {
  try {
    const args = switchValues(argv, flags as Record<string, FlagSpec>);
    return parseArgs({ args, options: flags, strict: true, allowPositionals: false }).values;
  } catch (e) {
    const msg = (e as Error).message;
    // parseArgs refuses "--parallelism -1" as ambiguous (the value looks like
    // a flag); the user meant a value, so judge it as the value it is.
    const ambiguous = msg.match(/^Option '--([a-z-]+)' argument is ambiguous/);
    const at = ambiguous ? argv.indexOf(`--${ambiguous[1]}`) : -1;
    if (at >= 0 && at + 1 < argv.length) {
      return parseFlags([
        ...argv.slice(0, at),
        `--${ambiguous![1]}=${argv[at + 1]}`,
        ...argv.slice(at + 2),
      ], flags);
    }
    throw new UsageError(
      describeFlagError(msg, { argv, flags: flags as Record<string, FlagSpec>, help: HELP }),
    );
  }
}

/**
 * The log format asked for, read before the flags are validated, so that a
 * refusal of the flags is logged in the format a log pipeline expects
 * (the chart passes `--log-format=json`).
 *
 * @example
 * ```ts
 * requestedLogFormat(["--log-format=json", "--parallelism", "0"]); // "json"
 * ```
 */
export function requestedLogFormat(argv: readonly string[]): LogFormat {
  const at = argv.lastIndexOf("--log-format");
  const eq = argv.findLast((a) => a.startsWith("--log-format="));
  // The later of the two forms wins, as parseArgs lets the last one win.
  const value = eq && argv.lastIndexOf(eq) > at ? eq.slice("--log-format=".length) : argv[at + 1];
  return at < 0 && !eq ? "text" : value === "json" ? "json" : "text";
}

/**
 * Parses argv into validated options.
 *
 * @throws {UsageError} naming the flag and what is wrong with it
 * @example
 * ```ts
 * parseOptions(["--job-template", "job.yaml", "--parallelism", "5"]).parallelism; // 5
 * ```
 */
export function parseOptions(argv: string[]): Options {
  const v = parseFlags(argv, FLAGS);
  const opts = readOptions(v);
  if (opts.help || opts.version) return opts;
  checkOptions(opts, v);
  return opts;
}

/** The options as the flags give them, each value checked on its own. */
function readOptions(v: Values): Options {
  const nodes = v.nodes?.split(",").map((s) => s.trim()).filter(Boolean);
  return {
    jobTemplate: v["job-template"] ?? "",
    namePrefix: v["name-prefix"],
    namespace: v.namespace,
    nodes,
    nodeSelectors: v["node-selector"] ?? [],
    nodeFieldSelector: v["node-field-selector"],
    nodePageSize: number("node-page-size", v["node-page-size"], 500, 1),
    ignoreNodeTaints: v["ignore-node-taints"] ?? false,
    waitForNodesSecs: number("wait-for-nodes-secs", v["wait-for-nodes-secs"], 0, 0, false),
    failIfNoNodes: v["fail-if-no-nodes"] ?? false,
    nodeSettleSecs: number("node-settle-secs", v["node-settle-secs"], 15, 0, false),
    parallelism: number("parallelism", v.parallelism, 100, 1),
    pollIntervalSecs: number("poll-interval-secs", v["poll-interval-secs"], 5, 0.1, false),
    pollOnly: v["poll-only"] ?? false,
    progressIntervalSecs: number(
      "progress-interval-secs",
      v["progress-interval-secs"],
      10,
      0.1,
      false,
    ),
    kubeApiConcurrency: number("kube-api-concurrency", v["kube-api-concurrency"], 16, 1),
    kubeApiQps: number("kube-api-qps", v["kube-api-qps"], 50, 0, false),
    kubeApiBurst: number("kube-api-burst", v["kube-api-burst"], 300, 1),
    apiWaitSecs: number("api-wait-secs", v["api-wait-secs"], 90, 0, false),
    ownerJobName: v["owner-job-name"],
    ownerJobFromPod: v["owner-job-from-pod"],
    trackingLabelPrefix: v["tracking-label-prefix"] ?? "job-dispatcher",
    yieldToLiveRun: v["yield-to-live-run"] ?? false,
    kubeconfig: v.kubeconfig,
    // An empty --context is no context, as kubectl reads it (`--context "$CTX"` with CTX unset).
    context: v.context || undefined,
    dryRun: oneOf("dry-run", v["dry-run"], ["client", "server", "plan"]),
    output: oneOf("output", v.output, ["text", "json"]) ?? "text",
    estimateFrom: nonEmpty("estimate-from", v["estimate-from"]),
    logFormat: oneOf("log-format", v["log-format"], ["text", "json"]) ?? "text",
    ...reportOptions(v),
    metricsAddr: v["metrics-addr"] === undefined ? undefined : metricsAddr(v["metrics-addr"]),
    metricsLingerSecs: number("metrics-linger-secs", v["metrics-linger-secs"], 0, 0, false),
    nodeRecords: oneOf("node-records", v["node-records"], ["all", "failures", "none"]) ?? "all",
    maxFailures: v["max-failures"],
    waves: waveSpec(v),
    waveSoakSecs: number("wave-soak-secs", v["wave-soak-secs"], 0, 0, false),
    verify: verifyConfig(v),
    maxPerTopology: v["max-per-topology"] === undefined
      ? undefined
      : parseTopologyLimit(v["max-per-topology"]),
    nodeTimeoutSecs: v["node-timeout-secs"] === undefined
      ? undefined
      : number("node-timeout-secs", v["node-timeout-secs"], 0, 1, false),
    deleteTimedOut: v["delete-timed-out"] ?? false,
    pin: oneOf("pin", v.pin, ["nodeName", "affinity"]) ?? "nodeName",
    order: oneOf("order", v.order, ["name", "random", "zone-interleaved"]) ?? "name",
    seed: number("seed", v.seed, 0, 0),
    stallWarnSecs: number("stall-warn-secs", v["stall-warn-secs"], 120, 1, false),
    nodeLabels: nodeLabels(v),
    waitNodeReadySecs: number("wait-node-ready-secs", v["wait-node-ready-secs"], 300, 0, false),
    requireNodeHandlers: v["require-node-handlers"]?.split(",").map((h) => h.trim())
      .filter(Boolean) ?? [],
    removeNodeTaints: v["remove-node-taints"] === undefined
      ? []
      : parseTaintSelectors(v["remove-node-taints"]),
    kubeletTimeoutWarnSecs: v["kubelet-timeout-warn-secs"] === undefined
      ? undefined
      : number("kubelet-timeout-warn-secs", v["kubelet-timeout-warn-secs"], 0, 1, false),
    skipSatisfiedNodes: v["skip-satisfied-nodes"] ?? false,
    cleanupJobTemplate: v["cleanup-job-template"],
    requireNodeRuntimeVersion: v["require-node-runtime-version"] ?? false,
    requireNodeMachineId: v["require-node-machine-id"] ?? false,
    maintenance: maintenanceOptions(v),
    gate: gateOptions(v),
    help: v.help ?? false,
    version: v.version ?? false,
  };
}

/**
 * Flags that are refused together, or one without the flag it needs, or a
 * value the API server would only answer with a confusing error: each with
 * its one line (the input's name and its fix), checked in order.
 */
const REFUSED: { when: (o: Options, v: Values) => boolean; why: (o: Options) => string }[] = [
  { when: (o) => !o.jobTemplate, why: () => "Missing --job-template: name a file, or - for stdin" },
  {
    when: (o, v) => v.nodes !== undefined && !o.nodes?.length,
    why: () => "Invalid --nodes: it names no node; give a comma-separated list",
  },
  {
    when: (o) => o.nodes !== undefined && (o.nodeSelectors.length > 0 || !!o.nodeFieldSelector),
    why: () =>
      "Invalid selection: --nodes is an explicit list; drop --node-selector/--node-field-selector",
  },
  {
    when: (o) => o.nodeSelectors.some((s) => !s.trim()),
    why: () => 'Invalid --node-selector "": give a label selector such as role=worker',
  },
  // The API server would answer "not found", and the tool would suggest
  // creating a namespace that cannot exist: say what a name may be instead.
  {
    when: (o) => o.namespace !== undefined && !isDnsLabel(o.namespace),
    why: (o) =>
      `Invalid --namespace ${JSON.stringify(o.namespace)}: a namespace is a DNS label ` +
      '(lowercase a-z, 0-9 and "-", at most 63 characters), e.g. ops',
  },
  // -o shapes the plan; a run's own output is its log (--log-format json).
  {
    when: (o, v) => v.output !== undefined && o.dryRun !== "plan",
    why: (o) =>
      `Invalid --output ${o.output}: it prints the plan of --dry-run=plan; ` +
      "a run's lines are its log (--log-format json)",
  },
  // Said rather than ignored: a CI job asking for JUnit would find no file.
  {
    when: (o, v) => v["report-format"] !== undefined && !o.report,
    why: () => "Invalid --report-format: it needs --report PATH, the file to write",
  },
  {
    when: (o) => !!o.maintenance.maxUnavailable && o.nodes !== undefined,
    why: () =>
      "Invalid --max-unavailable with --nodes: the budget watches a selection; " +
      "select with --node-selector or --node-field-selector instead",
  },
  {
    when: (o, v) => v["metrics-linger-secs"] !== undefined && !o.metricsAddr,
    why: () => "Invalid --metrics-linger-secs: it needs --metrics-addr, the listener to keep up",
  },
  {
    when: (_, v) => v.canary !== undefined && v.waves !== undefined,
    why: () => "Invalid --canary with --waves: --canary N is --waves N,100%; give one of them",
  },
  {
    when: (o, v) => v["wave-soak-secs"] !== undefined && !o.waves,
    why: () => "Invalid --wave-soak-secs: it needs --waves (or --canary), the waves to soak after",
  },
  {
    when: (_, v) =>
      v["verify-timeout-secs"] !== undefined && v["verify-pod-selector"] === undefined &&
      v["verify-job-template"] === undefined,
    why: () =>
      "Invalid --verify-timeout-secs: it needs --verify-pod-selector or --verify-job-template, " +
      "the verification it bounds",
  },
  {
    when: (o) => o.jobTemplate === "-" && o.verify?.jobTemplate === "-",
    why: () => "Invalid --verify-job-template -: stdin is already the --job-template; name a file",
  },
  {
    when: (o) => o.deleteTimedOut && o.nodeTimeoutSecs === undefined,
    why: () => "Invalid --delete-timed-out: it needs --node-timeout-secs",
  },
  {
    when: (o) => !!o.ownerJobName && !!o.ownerJobFromPod,
    why: () => "Invalid owner: give --owner-job-name or --owner-job-from-pod, not both",
  },
  {
    when: (o) => o.yieldToLiveRun && !o.ownerJobName && !o.ownerJobFromPod,
    why: () =>
      "Invalid --yield-to-live-run: it needs an owner (--owner-job-name or --owner-job-from-pod)",
  },
  {
    when: (o) => o.jobTemplate === "-" && o.cleanupJobTemplate === "-",
    why: () => "Invalid --cleanup-job-template -: stdin is already the --job-template; name a file",
  },
  {
    when: (o, v) => v["require-node-handlers"] !== undefined && !o.requireNodeHandlers.length,
    why: () => "Invalid --require-node-handlers: it names no handler, e.g. kata,kata-qemu",
  },
  {
    when: (o) => o.removeNodeTaints.length > 0 && o.nodeLabels?.value === undefined,
    why: () =>
      "Invalid --remove-node-taints: it needs --node-label (taints are lifted after the label)",
  },
  // A pause needs a place that outlives the metric's recovery and that a
  // person lifts: the owner's annotation or the pause file.
  {
    when: (o) =>
      o.gate?.onBreach === "pause" && !o.ownerJobName && !o.ownerJobFromPod &&
      !o.maintenance.pauseFile,
    why: () =>
      "Invalid --gate-prometheus-url: a breach pauses the run on its owner Job or --pause-file; " +
      "give --owner-job-name, --owner-job-from-pod or --pause-file, or --on-gate-breach exit",
  },
  {
    when: (o) => o.skipSatisfiedNodes && o.nodeLabels?.value === undefined,
    why: () => "Invalid --skip-satisfied-nodes: it needs --node-label (the value of a done node)",
  },
];

/** Checks the options together: the first refused combination throws. */
function checkOptions(opts: Options, v: Values): void {
  for (const rule of REFUSED) {
    if (rule.when(opts, v)) throw new UsageError(rule.why(opts));
  }
  if (opts.maxFailures !== undefined) failureBudget(opts.maxFailures, 0);
}

type Values = ReturnType<typeof parseArgs<{ options: typeof FLAGS }>>["values"];
type GateValues = ReturnType<typeof parseArgs<{ options: typeof GATE_FLAGS }>>["values"];

/**
 * Parses the health gate flags of argv; undefined without any.
 *
 * @throws {UsageError} naming the flag and the fix: a gate flag without
 * `--gate-prometheus-url`, a URL without a query or alert, a bad value
 * @example
 * ```ts
 * parseGateOptions(["--gate-prometheus-url", "http://p:9090", "--gate-query", "up == 0"])?.intervalSecs; // 30
 * ```
 */
export function parseGateOptions(argv: string[]): GateConfig | undefined {
  return gateOptions(parseFlags(argv, GATE_FLAGS));
}

function gateOptions(v: GateValues): GateConfig | undefined {
  const url = v["gate-prometheus-url"];
  if (url === undefined) {
    const stray = Object.keys(GATE_FLAGS).find((f) => v[f as keyof GateValues] !== undefined);
    if (stray) {
      throw new UsageError(
        `Invalid --${stray}: it needs --gate-prometheus-url URL, the Prometheus to ask`,
      );
    }
    return undefined;
  }
  if (!/^https?:\/\/[^/]/.test(url) || !URL.canParse(url)) {
    throw new UsageError(
      `Invalid --gate-prometheus-url ${JSON.stringify(url)}: expected an http:// or https:// URL`,
    );
  }
  const queries = v["gate-query"] ?? [];
  if (queries.some((q) => !q.trim())) {
    throw new UsageError('Invalid --gate-query "": give a PromQL expression such as up == 0');
  }
  const alerts = v["gate-alerts"];
  if (alerts !== undefined) gateAlerts(alerts);
  if (!queries.length && alerts === undefined) {
    throw new UsageError(
      "Invalid --gate-prometheus-url: it needs --gate-query EXPR or --gate-alerts REGEX, what to watch",
    );
  }
  return {
    url: url.replace(/\/+$/, ""),
    queries,
    alerts,
    allowEmpty: gateAllowEmpty(v["gate-allow-empty"] ?? [], queries, alerts),
    intervalSecs: number("gate-interval-secs", v["gate-interval-secs"], 30, 1, false),
    bearerTokenFile: nonEmpty("gate-bearer-token-file", v["gate-bearer-token-file"]),
    caFile: nonEmpty("gate-ca-file", v["gate-ca-file"]),
    onBreach: oneOf("on-gate-breach", v["on-gate-breach"], ["pause", "exit"]) ?? "pause",
  };
}

/**
 * `--gate-allow-empty`, each a `--gate-query` as given, one of their
 * selectors as the refusal names it, or the `--gate-alerts` pattern:
 * anything else (a typo) would exempt nothing, and is refused.
 */
function gateAllowEmpty(values: string[], queries: string[], alerts?: string): string[] {
  const known = new Set([...queries, ...(alerts === undefined ? [] : [alerts])]);
  for (const q of queries) {
    try {
      for (const s of selectors(q)) known.add(s.text);
    } catch {
      // A query the scanner cannot read is exempted whole, by its text.
    }
  }
  const stray = values.find((x) => !known.has(x));
  if (stray !== undefined) {
    throw new UsageError(
      `Invalid --gate-allow-empty ${JSON.stringify(stray)}: it is no --gate-query, none of ` +
        `their selectors (${[...known].map((k) => JSON.stringify(k)).join(", ")}) and not ` +
        "--gate-alerts; give one of them as written",
    );
  }
  return values;
}

/** `--gate-alerts`, refused unless it is a regex. */
function gateAlerts(re: string): void {
  try {
    new RegExp(`^(?:${re})$`);
  } catch (e) {
    throw new UsageError(
      `Invalid --gate-alerts ${JSON.stringify(re)}: not a regular expression (${
        (e as Error).message
      })`,
    );
  }
  if (!re) {
    throw new UsageError('Invalid --gate-alerts "": give an alert name or regex, e.g. Node.*');
  }
}

/** A path flag that may not be empty. */
function nonEmpty(flag: string, path: string | undefined): string | undefined {
  if (path !== undefined && !path.trim()) throw new UsageError(`Invalid --${flag} "": name a file`);
  return path;
}

/** `--waves`, or `--canary N` as `--waves N,100%`; undefined without either. */
function waveSpec(v: Values): WaveSpec | undefined {
  if (v.waves !== undefined) return { sizes: parseWaves(v.waves) };
  return v.canary === undefined ? undefined : canaryWaves(number("canary", v.canary, 1, 1));
}

/** The node verification flags; undefined without `--verify-pod-selector`/`--verify-job-template`. */
function verifyConfig(v: Values): VerifyConfig | undefined {
  const pods = v["verify-pod-selector"];
  const jobTemplate = v["verify-job-template"];
  if (pods === undefined && jobTemplate === undefined) return undefined;
  if (pods !== undefined) podSelector("verify-pod-selector", pods);
  if (jobTemplate === "") {
    throw new UsageError("Invalid --verify-job-template: name a file (a batch/v1 Job)");
  }
  return {
    podSelector: pods,
    jobTemplate,
    timeoutSecs: number("verify-timeout-secs", v["verify-timeout-secs"], 600, 1, false),
  };
}

/** The node label flags, checked together; undefined without `--node-label-key`. */
function nodeLabels(v: Values): LabelConfig | undefined {
  const key = v["node-label-key"];
  if (key === undefined) {
    const needsKey = [
      "node-label",
      "extra-node-label",
      "claim-node-pending",
      "node-label-pending-value",
      "remove-node-label",
      "instance-label-prefix",
      "multi-install-suffix",
      "skip-satisfied-nodes",
      "cleanup-job-template",
    ] as const;
    const given = needsKey.find((f) => v[f] !== undefined);
    if (given) {
      throw new UsageError(
        `Invalid --${given}: it needs --node-label-key KEY, the node label this run owns`,
      );
    }
    return undefined;
  }
  if (!isLabelKey(key)) {
    throw new UsageError(
      `Invalid --node-label-key ${JSON.stringify(key)}: expected a label key such as ` +
        "kata.example.com/installed",
    );
  }
  const value = v["node-label"];
  const pendingValue = v["node-label-pending-value"] ?? "false";
  for (const [flag, text] of [["node-label", value], ["node-label-pending-value", pendingValue]]) {
    if (text !== undefined && !isLabelValue(text)) {
      throw new UsageError(
        `Invalid --${flag} ${JSON.stringify(text)}: a label value has at most 63 letters, ` +
          "digits, '-', '_' or '.', and starts and ends with a letter or digit",
      );
    }
  }
  const remove = v["remove-node-label"] ?? false;
  const claim = v["claim-node-pending"] ?? false;
  if (remove && value !== undefined) {
    throw new UsageError(
      "Invalid --remove-node-label: a cleanup run removes the label; drop --node-label",
    );
  }
  if (!remove && value === undefined) {
    const orphan = claim ? "claim-node-pending" : v["extra-node-label"] ? "extra-node-label" : "";
    if (orphan) {
      throw new UsageError(
        `Invalid --${orphan}: it needs --node-label VALUE (or --remove-node-label for a cleanup)`,
      );
    }
  }
  if (value !== undefined && value === pendingValue) {
    throw new UsageError(
      `Invalid --node-label-pending-value ${pendingValue}: it equals --node-label, ` +
        "so a claimed node would look done",
    );
  }
  const prefix = v["instance-label-prefix"];
  const suffix = v["multi-install-suffix"];
  if ((prefix === undefined) !== (suffix === undefined)) {
    throw new UsageError(
      "Invalid instance: --instance-label-prefix and --multi-install-suffix go together",
    );
  }
  const mark = prefix === undefined ? undefined : `${prefix}/${suffix}`;
  if (mark !== undefined && (!isLabelKey(mark) || prefix!.includes("/"))) {
    throw new UsageError(
      `Invalid instance mark ${JSON.stringify(mark)}: --instance-label-prefix must be a DNS ` +
        "subdomain and --multi-install-suffix a label name, e.g. kata.example.com and blue",
    );
  }
  if (mark === key) {
    throw new UsageError(`Invalid instance mark ${mark}: it is the --node-label-key itself`);
  }
  const extra = parseExtraLabels(v["extra-node-label"] ?? [], key);
  if (mark && extra.some(([k]) => k === mark)) {
    throw new UsageError(`Invalid --extra-node-label ${mark}: it is this instance's mark`);
  }
  return { key, value, pendingValue, extra, claim, remove, mark, instancePrefix: prefix };
}

type MaintenanceValues = ReturnType<typeof parseArgs<{ options: typeof MAINTENANCE_FLAGS }>>[
  "values"
];

function podSelector(flag: string, text: string): PodSelector {
  if (!text.trim()) {
    throw new UsageError(
      `Invalid --${flag} "": it would match every pod; give a label selector such as app=web`,
    );
  }
  try {
    return { text, requirements: parseLabelSelector(text) };
  } catch (e) {
    throw new UsageError(
      `Invalid --${flag} ${JSON.stringify(text)}: ${(e as Error).message} ` +
        "(kubectl label selector syntax, e.g. app=web,tier!=cache)",
    );
  }
}

/**
 * Parses the maintenance flags of argv into validated options.
 *
 * @throws {UsageError} naming the flag and the fix, for a malformed value or
 * a flag that needs another (`--force` needs `--drain`)
 * @example
 * ```ts
 * parseMaintenanceOptions(["--drain", "--max-unavailable", "10%"]).cordon; // true
 * ```
 */
export function parseMaintenanceOptions(argv: string[]): MaintenanceConfig {
  return maintenanceOptions(parseFlags(argv, MAINTENANCE_FLAGS));
}

function maintenanceOptions(v: MaintenanceValues): MaintenanceConfig {
  const drainOnly = [
    "delete-emptydir-data",
    "force",
    "pod-selector",
    "grace-period",
    "drain-timeout-secs",
    "disable-eviction",
  ] as const;
  const needsDrain = drainOnly.find((f) => v[f] !== undefined);
  if (!v.drain && needsDrain) {
    throw new UsageError(`Invalid --${needsDrain}: it is a drain option; add --drain`);
  }
  // kubectl's --grace-period -1 means "the pod's own"; so does leaving it out.
  const grace = number("grace-period", v["grace-period"], -1, -1);
  const drain: DrainConfig | undefined = v.drain
    ? {
      deleteEmptyDirData: v["delete-emptydir-data"] ?? false,
      force: v.force ?? false,
      podSelector: v["pod-selector"] === undefined
        ? undefined
        : podSelector("pod-selector", v["pod-selector"]),
      gracePeriodSecs: grace < 0 ? undefined : grace,
      timeoutSecs: number("drain-timeout-secs", v["drain-timeout-secs"], 600, 1, false),
      disableEviction: v["disable-eviction"] ?? false,
    }
    : undefined;
  const cordon = (v.cordon ?? false) || drain !== undefined;
  if (v["uncordon-on-failure"] && !cordon) {
    throw new UsageError(
      "Invalid --uncordon-on-failure: it needs --cordon or --drain (nothing is cordoned without)",
    );
  }
  const blockingPodSelectors = (v["blocking-pod-selector"] ?? []).map((s) =>
    podSelector("blocking-pod-selector", s)
  );
  if (v["blocked-timeout-secs"] !== undefined && !blockingPodSelectors.length) {
    throw new UsageError("Invalid --blocked-timeout-secs: it needs --blocking-pod-selector");
  }
  if (v["pause-file"] !== undefined && !v["pause-file"].trim()) {
    throw new UsageError('Invalid --pause-file "": name a file whose existence pauses the run');
  }
  return {
    cordon,
    uncordonOnFailure: v["uncordon-on-failure"] ?? false,
    drain,
    maxUnavailable: v["max-unavailable"] === undefined
      ? undefined
      : parseMaxUnavailable(v["max-unavailable"]),
    blockingPodSelectors,
    blockedTimeoutSecs: v["blocked-timeout-secs"] === undefined
      ? undefined
      : number("blocked-timeout-secs", v["blocked-timeout-secs"], 0, 1, false),
    windows: (v.window ?? []).map(parseWindow),
    retryFailed: v["retry-failed"] ?? false,
    postNodeDelaySecs: number("post-node-delay-secs", v["post-node-delay-secs"], 0, 0, false),
    pauseFile: v["pause-file"],
  };
}
