/**
 * The entry of the separate CommonJS bundle of client-node's KubeConfig that
 * `scripts/bundle.sh` embeds in dist/job-dispatcher.js as a string, compiled
 * only when a kubeconfig needs it (see there).
 *
 * @module
 */

export { KubeConfig } from "@kubernetes/client-node/dist/config.js";
