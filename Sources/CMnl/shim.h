#include <libmnl/libmnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/if_link.h>
#include <linux/if_addr.h>
#include <linux/fib_rules.h>
#include <linux/pkt_sched.h>
#include <linux/veth.h>
