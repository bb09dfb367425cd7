package main

import (
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeFlags are kubectl's connection flags (--kubeconfig, --context,
// --cluster, --user, -n/--namespace, -s/--server, --token, --as, --as-group,
// --as-uid, --certificate-authority, --client-certificate, --client-key,
// --insecure-skip-tls-verify, --tls-server-name, --request-timeout), bound as
// kubectl binds them, from client-go's clientcmd.
type kubeFlags struct {
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
}

func newKubeFlags() *kubeFlags { return &kubeFlags{} }

func (k *kubeFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)")
	clientcmd.BindOverrideFlags(&k.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
}

// restConfig is the client configuration the flags select, for a client
// calling itself agent.
func (k *kubeFlags) restConfig(agent string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &k.overrides).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = agent
	return cfg, nil
}
