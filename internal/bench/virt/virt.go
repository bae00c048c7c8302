//go:build libvirt

package virt

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"
)

// Conn is a libvirt connection.
type Conn struct {
	c   *libvirt.Connect
	URI string
}

// Open connects to uri.
func Open(uri string) (*Conn, error) {
	c, err := libvirt.NewConnect(uri)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", uri, err)
	}
	return &Conn{c: c, URI: uri}, nil
}

// Close closes the connection.
func (c *Conn) Close() error {
	_, err := c.c.Close()
	return err
}

// Versions returns the libvirt library and hypervisor versions as
// "major.minor.micro".
func (c *Conn) Versions() (libvirtVersion, hypervisor string, err error) {
	lv, err := c.c.GetLibVersion()
	if err != nil {
		return "", "", fmt.Errorf("libvirt version: %w", err)
	}
	hv, err := c.c.GetVersion()
	if err != nil {
		return "", "", fmt.Errorf("hypervisor version: %w", err)
	}
	return version(lv), version(hv), nil
}

func version(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000)
}

// InactiveXML is `virsh dumpxml --inactive name`: the persistent
// definition, without what libvirt added at start.
func (c *Conn) InactiveXML(name string) (string, error) {
	d, err := c.c.LookupDomainByName(name)
	if err != nil {
		return "", fmt.Errorf("looking up %s: %w", name, err)
	}
	defer d.Free()
	x, err := d.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE)
	if err != nil {
		return "", fmt.Errorf("dumpxml --inactive %s: %w", name, err)
	}
	return x, nil
}

// SerialLogPath is the file the first serial port of a defined domain logs
// to (the guest console), "" when none.
func (c *Conn) SerialLogPath(name string) (string, error) {
	x, err := c.InactiveXML(name)
	if err != nil {
		return "", err
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(x); err != nil {
		return "", fmt.Errorf("parsing the XML of %s: %w", name, err)
	}
	if d.Devices == nil || len(d.Devices.Serials) == 0 || d.Devices.Serials[0].Log == nil {
		return "", nil
	}
	return d.Devices.Serials[0].Log.File, nil
}

// DefineAndStart defines x persistently and starts it, as a plain libvirt
// client does; it returns once libvirt reports the domain started (QEMU
// runs the guest), and how long the define and the start took.
func (c *Conn) DefineAndStart(x string) (define, start time.Duration, err error) {
	t0 := time.Now()
	d, err := c.c.DomainDefineXML(x)
	if err != nil {
		return 0, 0, fmt.Errorf("defining: %w", err)
	}
	defer d.Free()
	t1 := time.Now()
	if err := d.Create(); err != nil {
		return t1.Sub(t0), 0, fmt.Errorf("starting: %w", err)
	}
	return t1.Sub(t0), time.Since(t1), nil
}

// Remove destroys (if running) and undefines domain name; a domain that
// does not exist is not an error.
func (c *Conn) Remove(name string) error {
	d, err := c.c.LookupDomainByName(name)
	if isNoDomain(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking up %s: %w", name, err)
	}
	defer d.Free()
	if active, _ := d.IsActive(); active {
		if err := d.Destroy(); err != nil && !isNoDomain(err) {
			return fmt.Errorf("destroying %s: %w", name, err)
		}
	}
	if err := d.UndefineFlags(libvirt.DOMAIN_UNDEFINE_NVRAM); err != nil && !isNoDomain(err) {
		return fmt.Errorf("undefining %s: %w", name, err)
	}
	return nil
}

// Names lists the domains, defined or running, whose name starts with
// prefix.
func (c *Conn) Names(prefix string) ([]string, error) {
	ds, err := c.c.ListAllDomains(0)
	if err != nil {
		return nil, fmt.Errorf("listing domains: %w", err)
	}
	var out []string
	for _, d := range ds {
		if n, err := d.GetName(); err == nil && strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
		d.Free()
	}
	return out, nil
}

// RunningNotPrefixed counts the running domains whose name does not start
// with prefix: other users of the same libvirtd.
func (c *Conn) RunningNotPrefixed(prefix string) int {
	ds, err := c.c.ListAllDomains(libvirt.CONNECT_LIST_DOMAINS_ACTIVE)
	if err != nil {
		return -1
	}
	n := 0
	for _, d := range ds {
		if name, err := d.GetName(); err == nil && !strings.HasPrefix(name, prefix) {
			n++
		}
		d.Free()
	}
	return n
}

// Active reports whether domain name exists and runs.
func (c *Conn) Active(name string) bool {
	d, err := c.c.LookupDomainByName(name)
	if err != nil {
		return false
	}
	defer d.Free()
	a, _ := d.IsActive()
	return a
}

// RemoveAll removes every domain whose name starts with prefix, eight at
// a time on connections of their own (a destroy takes QEMU about 2 s to
// honour under TCG), and returns how many there were.
func (c *Conn) RemoveAll(prefix string) (int, error) {
	names, err := c.Names(prefix)
	if err != nil || len(names) == 0 {
		return 0, err
	}
	jobs := make(chan string)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for range min(8, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := Open(c.URI)
			if err != nil {
				conn = c
			} else {
				defer conn.Close()
			}
			for n := range jobs {
				errs <- conn.Remove(n)
			}
		}()
	}
	for _, n := range names {
		jobs <- n
	}
	close(jobs)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return len(names), errors.Join(all...)
}

func isNoDomain(err error) bool {
	var le libvirt.Error
	return errors.As(err, &le) && le.Code == libvirt.ERR_NO_DOMAIN
}
