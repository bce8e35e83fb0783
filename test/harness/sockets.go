package harness

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SocketOwner names the process among procs that holds the client end of
// the local TCP connection from client to server ("manager-2:4242", name
// and pid), or "" when none does. It reads /proc/net/tcp for the socket's
// inode and each process's open files for the socket: a recording proxy
// asks it once per connection, while the connection is open, to tell which
// replica sent a request.
func SocketOwner(client, server string, procs ...*Proc) string {
	inode, err := socketInode(client, server)
	if err != nil || inode == "" {
		return ""
	}
	for _, p := range procs {
		if pid := p.PID(); pid != 0 && holdsSocket(pid, inode) {
			return fmt.Sprintf("%s:%d", p.Name, pid)
		}
	}
	return ""
}

// holdsSocket reports whether process pid has socket inode open.
func holdsSocket(pid int, inode string) bool {
	want := "socket:[" + inode + "]"
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && link == want {
			return true
		}
	}
	return false
}

// socketInode finds the IPv4 socket whose local address is local and whose
// peer is remote in /proc/net/tcp.
func socketInode(local, remote string) (string, error) {
	l, err := procAddr(local)
	if err != nil {
		return "", err
	}
	r, err := procAddr(remote)
	if err != nil {
		return "", err
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fs := strings.Fields(sc.Text())
		if len(fs) > 9 && fs[1] == l && fs[2] == r {
			return fs[9], nil
		}
	}
	return "", sc.Err()
}

// procAddr writes an IPv4 address and port as /proc/net/tcp does: the
// address's bytes in host (little-endian) order, the port big-endian, in
// upper-case hex.
func procAddr(hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", err
	}
	ip := net.ParseIP(host).To4()
	if ip == nil {
		return "", fmt.Errorf("%s is not IPv4", host)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], n), nil
}
