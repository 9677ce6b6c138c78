// Build and run: gcc -O2 -mavx2 -mfma -o /tmp/cpu_ceilings scripts/cpu_ceilings.c && /tmp/cpu_ceilings
// Throughput of the AVX2 int8 dot-product step without VNNI (vpmaddubsw + vpmaddwd + vpaddd per 32 u8 x s8 MACs)
// and of float32 FMA, in registers, one thread: the per-core ceilings a GEMM on this CPU can approach.
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define R 10
int main(){
  __m256i a[R], one=_mm256_set1_epi16(1), acc[R];
  for(int i=0;i<R;i++){a[i]=_mm256_set1_epi8(i+1); acc[i]=_mm256_setzero_si256();}
  __m256i b=_mm256_set1_epi8(5);
  long N=50000000; double t=now();
  for(long n=0;n<N;n++){
    __asm__ volatile("" : "+x"(b));
#pragma GCC unroll 10
    for(int i=0;i<R;i++) acc[i]=_mm256_add_epi32(acc[i],_mm256_madd_epi16(_mm256_maddubs_epi16(a[i],b),one));
  }
  double dt=now()-t; int s=0; for(int i=0;i<R;i++) s+=_mm256_extract_epi32(acc[i],0);
  printf("int8 (maddubs+madd+add): %.1f GOP/s per core [%d]\n", 2.0*N*R*32/dt/1e9, s);
  __m256 f[R], x=_mm256_set1_ps(0.999f), y=_mm256_set1_ps(1e-4f);
  for(int i=0;i<R;i++) f[i]=_mm256_set1_ps(i*0.01f);
  t=now();
  for(long n=0;n<N;n++){
    __asm__ volatile("" : "+x"(x));
#pragma GCC unroll 10
    for(int i=0;i<R;i++) f[i]=_mm256_fmadd_ps(f[i],x,y);
  }
  dt=now()-t; float fs=0; for(int i=0;i<R;i++) fs+=f[i][0];
  printf("fp32 FMA: %.1f GFLOP/s per core [%f]\n", 2.0*N*R*8/dt/1e9, fs);
}
