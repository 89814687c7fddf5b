// SPDX-License-Identifier: MIT OR Apache-2.0
//
// linerate's XDP program: redirects the test's UDP datagrams to the AF_XDP
// socket bound to the queue they arrived on, and passes every other packet
// to the kernel (the control connection, SSH, ARP, the host's traffic).
//
// A datagram is the test's when its (destination address, UDP destination
// port) is a key of `filters`, or (any address, port) is: the loader fills
// the map, one entry per stream. IPv4 addresses are stored IPv4-mapped
// (::ffff:a.b.c.d) so one key type serves both families. Fragments, IP
// options past the header length, IPv6 extension headers and VLAN tags go
// to the kernel: linerate's datagrams have none of them.
//
// Self-contained on purpose (no kernel or libbpf headers): the build needs
// clang's BPF target and nothing else. Built by build.rs.

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;

#define SEC(name) __attribute__((section(name), used))

enum { XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT };
enum { BPF_MAP_TYPE_HASH = 1, BPF_MAP_TYPE_XSKMAP = 17 };

struct xdp_md {
	__u32 data;
	__u32 data_end;
	__u32 data_meta;
	__u32 ingress_ifindex;
	__u32 rx_queue_index;
	__u32 egress_ifindex;
};

// BTF-defined maps (section ".maps"), as libbpf's bpf_helpers.h spells
// them, so aya, libbpf and `ip link set … xdp obj` all load this object.
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

// Helper numbers of include/uapi/linux/bpf.h (stable ABI).
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_redirect_map)(void *map, __u64 key, __u64 flags) = (void *)51;

struct filter_key {
	__u8 addr[16]; // destination address, IPv4-mapped for IPv4; zero: any
	__u16 port;    // UDP destination port, network byte order
	__u16 pad;     // zero
};

// Queue index -> AF_XDP socket (sized for a NIC's queues).
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

// The test's flows; the value is unused.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct filter_key);
	__type(value, __u32);
} filters SEC(".maps");

#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IPPROTO_UDP 17

static __u16 be16(const __u8 *p) { return (__u16)((p[0] << 8) | p[1]); }

// Fills `key` from an IPv4 packet at `ip`; 0 when it is not the test's kind.
static int ipv4_key(const __u8 *ip, const __u8 *end, struct filter_key *key)
{
	if (ip + 20 > end)
		return 0;
	__u32 ihl = (ip[0] & 0x0f) * 4;
	if ((ip[0] >> 4) != 4 || ihl < 20 || ip[9] != IPPROTO_UDP)
		return 0;
	// More fragments, or an offset: only the kernel reassembles.
	if ((be16(ip + 6) & 0x3fff) != 0)
		return 0;
	const __u8 *udp = ip + ihl;
	if (udp + 8 > end)
		return 0;
	key->addr[10] = 0xff;
	key->addr[11] = 0xff;
	__builtin_memcpy(&key->addr[12], ip + 16, 4);
	__builtin_memcpy(&key->port, udp + 2, 2);
	return 1;
}

// Fills `key` from an IPv6 packet at `ip`; 0 when it is not the test's kind.
static int ipv6_key(const __u8 *ip, const __u8 *end, struct filter_key *key)
{
	if (ip + 40 + 8 > end)
		return 0;
	if ((ip[0] >> 4) != 6 || ip[6] != IPPROTO_UDP)
		return 0;
	__builtin_memcpy(key->addr, ip + 24, 16);
	__builtin_memcpy(&key->port, ip + 40 + 2, 2);
	return 1;
}

SEC("xdp")
int linerate_redirect(struct xdp_md *ctx)
{
	const __u8 *data = (const __u8 *)(long)ctx->data;
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	struct filter_key key = {};

	if (data + ETH_HLEN > end)
		return XDP_PASS;
	__u16 proto = be16(data + 12);
	int ours = 0;
	if (proto == ETH_P_IP)
		ours = ipv4_key(data + ETH_HLEN, end, &key);
	else if (proto == ETH_P_IPV6)
		ours = ipv6_key(data + ETH_HLEN, end, &key);
	if (!ours)
		return XDP_PASS;
	if (!bpf_map_lookup_elem(&filters, &key)) {
		__builtin_memset(key.addr, 0, sizeof(key.addr));
		if (!bpf_map_lookup_elem(&filters, &key))
			return XDP_PASS;
	}
	// No socket on this queue: the lower bits of the flags are the
	// action taken instead (kernel 5.3 and later).
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "Dual MIT/GPL";
