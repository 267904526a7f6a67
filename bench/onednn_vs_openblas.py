#!/usr/bin/python3
"""The next MFU experiment of issue 16: is oneDNN's float32 matmul faster than OpenBLAS's
at the quickstart's shapes? Side by side in one run, 2 threads, mean over 200 calls after
20 warm-up calls, GFLOP/s of y = x W^T for x (M, K), W (N, K):
  blas        torch's float32 linear (OpenBLAS here)
  mkldnn      oneDNN's linear, with x and W already in its layout
  mkldnn+conv the same, counting the conversions to and from its layout
  bf16        torch's bf16 linear (oneDNN), for scale
Run: /usr/bin/python3 bench/onednn_vs_openblas.py
"""
import torch, time
torch.set_num_threads(2)
def bench(f, n=200):
    for _ in range(20): f()
    t=time.perf_counter()
    for _ in range(n): f()
    return (time.perf_counter()-t)/n
for (M,K,N) in [(1024,64,256),(1024,256,64),(1024,64,64),(1024,64,256*4),(4096,256,1024)]:
    x=torch.randn(M,K); w=torch.randn(N,K)
    a=bench(lambda: torch.nn.functional.linear(x,w))
    xm=x.to_mkldnn(); 
    b=bench(lambda: torch._C._nn.mkldnn_linear(xm,w.to_mkldnn()) )
    b2=bench(lambda: torch._C._nn.mkldnn_linear(x.to_mkldnn(),w.to_mkldnn()).to_dense())
    xb=x.bfloat16(); wb=w.bfloat16()
    c=bench(lambda: torch.nn.functional.linear(xb,wb))
    fl=2*M*K*N
    print(M,K,N,"blas %.1f GF/s  mkldnn %.1f  mkldnn+conv %.1f  bf16 %.1f"%(fl/a/1e9, fl/b/1e9, fl/b2/1e9, fl/c/1e9))
