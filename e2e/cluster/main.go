// Command k8s is a multi-call binary: the pieces of a real Kubernetes control
// plane, linked once so that a cold build compiles the shared packages once.
//
//	k8s etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|certs|outcomes [flags]
//
// outcomes is not part of Kubernetes: it copies each fake node's outcome label
// onto the pods bound to it, for the kwok stages in e2e/stages (outcomes.go).
package main

import (
	"fmt"
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: k8s etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|certs|outcomes [flags]")
		os.Exit(2)
	}
	name := os.Args[1]
	// Each component parses os.Args itself, so present it its own argv.
	os.Args = append([]string{name}, os.Args[2:]...)
	switch name {
	case "etcd":
		etcdmain.Main(os.Args)
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kubectl":
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
	case "outcomes":
		if err := runOutcomes(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "outcomes:", err)
			os.Exit(1)
		}
	case "certs":
		if err := writeCerts(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "certs:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "k8s: unknown component %q\n", name)
		os.Exit(2)
	}
}
