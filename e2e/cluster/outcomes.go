package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

const (
	// fakeNodeAnnotation marks the nodes kwok simulates; pods elsewhere are
	// left alone so that a real kubelet (if any) keeps full control.
	fakeNodeAnnotation = "kwok.x-k8s.io/node"
	// outcomeKey is the node label a test sets and the pod annotation the kwok
	// stages in e2e/stages match on.
	outcomeKey = "e2e.job-dispatcher.io/outcome"
	// defaultOutcome applies to fake nodes without an outcome label.
	defaultOutcome  = "succeed"
	podsByNodeIndex = "nodeName"
)

// validOutcomes are the values the kwok stages know; anything else would leave
// the pod untouched, which looks like a stall but is a typo in a test.
var validOutcomes = map[string]bool{"succeed": true, "fail": true, "stall": true}

// runOutcomes copies the outcome label of each fake node onto the pods bound to
// it, as the annotation the kwok pod stages require. kwok stages only see the
// pod, and they match nothing until the annotation is there, so a pod never
// starts down the wrong path before its node's outcome is known.
func runOutcomes(args []string) error {
	flags := pflag.NewFlagSet("outcomes", pflag.ContinueOnError)
	kubeconfig := flags.String("kubeconfig", "", "path to an admin kubeconfig")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" {
		return errors.New("usage: k8s outcomes --kubeconfig FILE")
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("cannot load kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	nodeInformer := factory.Core().V1().Nodes().Informer()
	if err := podInformer.AddIndexers(cache.Indexers{podsByNodeIndex: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return nil, nil
		}
		return []string{pod.Spec.NodeName}, nil
	}}); err != nil {
		return err
	}

	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueuePod := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !needsOutcome(pod) {
			return
		}
		if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
			queue.Add(key)
		}
	}
	// A pod may be bound before its node exists (tests create both in any
	// order), so a node appearing or changing re-examines its waiting pods.
	enqueueNodePods := func(obj any) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		pods, _ := podInformer.GetIndexer().ByIndex(podsByNodeIndex, node.Name)
		for _, p := range pods {
			enqueuePod(p)
		}
	}
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueuePod,
		UpdateFunc: func(_, obj any) { enqueuePod(obj) },
	}); err != nil {
		return err
	}
	if _, err := nodeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueNodePods,
		UpdateFunc: func(_, obj any) { enqueueNodePods(obj) },
	}); err != nil {
		return err
	}

	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.HasSynced, nodeInformer.HasSynced) {
		return errors.New("cannot sync informers: stopped before the caches filled")
	}
	log.Printf("outcomes: watching pods on nodes annotated %s=fake", fakeNodeAnnotation)

	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	for {
		key, shutdown := queue.Get()
		if shutdown {
			return nil
		}
		err := annotate(ctx, client, podInformer.GetIndexer(), nodeInformer.GetIndexer(), key)
		if err != nil {
			log.Printf("outcomes: cannot annotate pod %s: %v", key, err)
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

// needsOutcome reports whether pod is bound, alive and not yet annotated. A
// test may annotate a pod itself to override its node's outcome.
func needsOutcome(pod *corev1.Pod) bool {
	_, annotated := pod.Annotations[outcomeKey]
	return pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil && !annotated
}

func annotate(ctx context.Context, client kubernetes.Interface, pods, nodes cache.Indexer, key string) error {
	obj, exists, err := pods.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod)
	if !needsOutcome(pod) {
		return nil
	}
	obj, exists, err = nodes.GetByKey(pod.Spec.NodeName)
	if err != nil || !exists {
		// The node's add event requeues this pod.
		return err
	}
	node := obj.(*corev1.Node)
	if node.Annotations[fakeNodeAnnotation] != "fake" {
		return nil
	}
	outcome, ok := node.Labels[outcomeKey]
	if !ok {
		outcome = defaultOutcome
	}
	if !validOutcomes[outcome] {
		log.Printf("outcomes: node %s has unknown %s=%q; pod %s will stay Pending", node.Name, outcomeKey, outcome, key)
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{outcomeKey: outcome}},
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "e2e-outcomes"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		log.Printf("outcomes: pod %s on node %s: %s", key, node.Name, outcome)
	}
	return err
}
