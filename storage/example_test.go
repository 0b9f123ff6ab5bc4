package storage_test

import (
	"fmt"

	"github.com/provisiond/provisiond/storage"
)

func ExampleParseConstraintsMap() {
	cons, err := storage.ParseConstraintsMap([]string{"pgdata=ebs,10G,2", "logs=512M", "cache"}, false)
	if err != nil {
		panic(err)
	}
	fmt.Println(cons["pgdata"], "|", cons["logs"], "|", cons["cache"])
	// Output: ebs,2,10240M | 1,512M | 1
}

func ExampleManager() {
	m := storage.NewManager(&storage.MemPoolStore{}, storage.KubernetesRegistry())
	if _, err := m.Create("fast", storage.ProviderKubernetes, map[string]any{"storage-class": "ssd"}); err != nil {
		panic(err)
	}
	_, err := m.Create("fast", storage.ProviderTmpfs, nil)
	fmt.Println(err)

	fast, _ := m.Get("fast")
	tmpfs, _ := m.Get("tmpfs") // a provider type stands for itself
	fmt.Println(fast.Provider, fast.Attrs, "|", tmpfs.Provider, tmpfs.Attrs == nil)

	_, err = m.Get("slow")
	fmt.Println(err)
	// Output:
	// creating pool "fast": pool "fast" already exists
	// kubernetes map[storage-class:ssd] | tmpfs true
	// pool "slow" not found
}

func ExampleManager_ApplicationFilesystems() {
	m := storage.NewManager(&storage.MemPoolStore{}, storage.KubernetesRegistry())
	fss, err := m.ApplicationFilesystems(storage.FilesystemArgs{
		Application:  "mariadb",
		Constraints:  map[string]storage.Constraints{"database": {Size: 1024, Count: 1}},
		Charm:        map[string]storage.CharmStorage{"database": {Location: "/var/lib/mysql", CountMax: 1}},
		StorageClass: "microk8s-hostpath",
	})
	if err != nil {
		panic(err)
	}
	fs := fss[0]
	fmt.Println(fs.StorageName, fs.Size, fs.Provider, fs.Attributes, fs.Tags, fs.Attachment.MountPoint)
	// Output: database 1024 kubernetes map[storage-class:microk8s-hostpath] map[juju-storage-owner:mariadb] /var/lib/mysql
}
