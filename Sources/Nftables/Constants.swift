// <linux/netfilter.h> cannot be imported beside glibc's <netinet/in.h> (it
// redefines in_addr), so its few constants are restated here.
let NFPROTO_INET: Int32 = 1    // NFPROTO_INET
let NFPROTO_IPV4: Int32 = 2    // NFPROTO_IPV4
let NFPROTO_IPV6: Int32 = 10   // NFPROTO_IPV6
let NF_DROP: Int32 = 0         // NF_DROP
let NF_ACCEPT: Int32 = 1       // NF_ACCEPT
