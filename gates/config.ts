/**
 * What the health gates need (`--gate-*`): where Prometheus answers, what it
 * is asked, how often, and what a breach does. `cli/` fills it from the flags.
 *
 * @module
 */

/** The health gates' configuration. */
export interface GateConfig {
  /**
   * Prometheus's base URL (`http://prometheus:9090`), or the API server's
   * service proxy to it (`https://API/api/v1/namespaces/NS/services/NAME:9090/proxy`),
   * which is reached with the kubeconfig's credentials.
   */
  url: string;
  /** Instant queries: each is breached while it returns a non-empty vector. */
  queries: string[];
  /** Breached while an alert whose name matches this (anchored) regex is firing. */
  alerts?: string;
  /**
   * What may match no series (`--gate-allow-empty`): a query as given (all
   * its selectors), one selector as the refusal names it, or the
   * `--gate-alerts` pattern. Every other selector must match data, or the
   * gate has no answer (no data), not a clean one.
   */
  allowEmpty?: string[];
  /** How old a result may be when a Job starts, in seconds. @default 30 */
  intervalSecs: number;
  /** A file holding a bearer token, read again before every request. */
  bearerTokenFile?: string;
  /** A PEM file of CAs that sign Prometheus's certificate. */
  caFile?: string;
  /** What a breach does: pause the run (latched), or end it with exit 5. @default "pause" */
  onBreach: "pause" | "exit";
}
