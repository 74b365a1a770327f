# Two contexts with the same client certificate (under an intermediate CA):
# the first sends the intermediate with it (client-chain.pem), the second
# the certificate alone, which the server cannot verify (400).  One
# http.client request each.  Usage: python3 tls_chain.py PORT TLSDIR
import http.client, ssl, sys
port, d = int(sys.argv[1]), sys.argv[2]
def get(ctx, i):
    c = http.client.HTTPSConnection('127.0.0.1', port, context=ctx)
    try:
        c.request('GET', '/echo/%d' % i)
        r = c.getresponse(); r.read()
        print(i, r.status)
    except Exception as e:
        print(i, 'error', e)
    c.close()
def mk(chain):
    ctx = ssl.create_default_context(cafile=d + '/ca.pem')
    ctx.load_cert_chain(d + '/' + chain, d + '/client-int.key')
    return ctx
get(mk('client-chain.pem'), 1)   # leaf + intermediate
get(mk('client-int.pem'), 2)     # the same leaf alone
