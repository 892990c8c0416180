/* Access-flag rules for memory regions and QPs. */
#ifndef URO_ACCESS_H
#define URO_ACCESS_H

/* 0 or EINVAL (ibv_reg_mr(3): remote write or atomic access needs local
 * write). */
int uro_mr_access_check(unsigned access);
/* 0 or EINVAL for flags no QP access mask can hold. */
int uro_qp_access_check(unsigned access);

#endif
